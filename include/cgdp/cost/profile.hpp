// A machine profile: the measured (or hand-written) costs the cost model predicts from. Written by
// `cgdp profile`, read by `cgdp predict`, `--chunk auto` and tools/chunk_tuner; the JSON schema is
// documented in docs/profile.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cgdp {

// One layer of the train net, in forward order, measured with `batch` samples per worker while
// `devices` workers ran at once (so on a shared host the times include the contention).
struct LayerCost {
  std::string name;         // as in the model file (Split layers inserted for fan-out included)
  std::string type;         // informative only
  double forward_us = 0;    // >= 0
  double backward_us = 0;   // >= 0
  int64_t param_bytes = 0;  // learnable parameters, 4-byte floats; 0 for layers without
};

// One kind of copy: time(bytes) = latency_us + bytes / (gbps * 1e3) microseconds.
struct LinkCost {
  double gbps = 0;        // > 0, in 1e9 bytes per second
  double latency_us = 0;  // >= 0, fixed cost per copy
};

// Host summation of `inputs` buffers: `gbps` counts the bytes of ONE input summed per second
// (time(bytes) = bytes / (gbps * 1e3) us for a chunk of `bytes` per worker).
struct HostSumCost {
  int inputs = 0;  // >= 1
  double gbps = 0;
};

// The network between hosts (cgdp predict --hosts): one host's link, full duplex. Unlike the other
// links' gbps (bytes), `gbps` is in Gbit/s (1e9 bits per second), as network links are rated.
struct NetworkCost {
  double gbps = 0;        // > 0
  double latency_us = 0;  // >= 0, per message (a piece of at most 1 MiB, src/shard/)
};

// The data loader on its own (cgdp profile on image data): what one decode thread fills.
struct LoaderCost {
  double images_per_s_per_thread = 0;  // > 0
  int threads = 1;                      // threads it was measured with (the rate is their mean)
  std::string data;                     // informative: the source and sample shape measured
};

struct Profile {
  int version = 1;
  std::string model;     // informative: the model file it was measured on
  std::string backend;   // "cpu" or "cuda"
  std::string device;    // informative: device name
  std::string precision = "fp32";  // informative: the layers' --precision when measured
  int devices = 1;       // workers that ran at once while measuring
  int batch = 1;         // samples per worker
  int host_threads = 1;  // OpenMP threads that summed
  std::vector<LayerCost> layers;
  LinkCost d2h;        // device -> pinned host, per chunk copy
  LinkCost h2d;        // pinned host -> device
  LinkCost p2p;        // device -> device (ps0's tree)
  double sync_us = 0;  // one sync point: event record + wait + host callback hand-off
  // Optional (0): backward time lost per MB (1e6 bytes) of a chunk whose exchange runs beside
  // it (on a GPU the copies take device memory bandwidth from the layers); `cgdp profile` measures
  // it on CUDA. The CPU backend's equivalent is shared_cores and contention_factor.
  double overlap_us_per_mb = 0;
  std::vector<HostSumCost> host_sum;  // by number of inputs, at least inputs = devices
  double update_gbps = 0;             // solver step over parameter bytes, on one device
  double device_sum_gbps = 0;         // ps0: a parent adds one child's gradients, on device
  // Optional (0 = unlimited): bandwidth that all copies running at once in one direction share
  // (to the host or a peer, or back), e.g. host memory on the CPU backend. Each copy then moves at
  // min(its link's gbps, host_memory_gbps / copies at once). See docs/profile.md.
  double host_memory_gbps = 0;
  // Optional (0 = none): the cores the workers compute on when the copies and the host sum run
  // on them too (the CPU backend); their work then slows backward. See docs/profile.md.
  int shared_cores = 0;
  // Optional (1): how many times its core time spread over shared_cores the exchange really costs
  // the backward (a core lost mid-way stalls the OpenMP region its other threads wait in);
  // `cgdp profile` measures it on the CPU backend. See docs/profile.md.
  double contention_factor = 1;
  // Optional (1): how many times longer each exchange stage of a chunk takes while the layers
  // compute beside it (every chunk but the last): on shared cores the copies and sums get only
  // part of a core. `cgdp profile` measures it on the CPU backend. See docs/profile.md.
  double exchange_stretch = 1;
  // Optional (1): how many times faster the sufficient-factor rebuild's GEMM runs from bf16 rows
  // (tensor cores, fp32 sums) than from fp32 rows; `cgdp profile` measures it on CUDA. The CPU
  // backend widens bf16 rows first, so 1 there. See docs/profile.md.
  double rebuild_bf16_speedup = 1;
  // Optional: the network, for predicting a run over several hosts (flags override it).
  std::optional<NetworkCost> network;
  // Optional: the loader's decode rate, measured when the profile's data are image files.
  std::optional<LoaderCost> loader;
  // Not in the file: where read_profile read it from, so that later errors can name it.
  std::string source = "profile";
};

// Reads and validates a profile; IoError/DataError name the file and the field (e.g.
// "p.json: layers[3].backward_us: expected a number >= 0").
Profile read_profile(const std::string& path);
// Writes atomically (io/file.hpp).
void write_profile(const Profile& profile, const std::string& path);

}  // namespace cgdp
