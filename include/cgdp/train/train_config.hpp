// Everything a training run is told by the command line (or a test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/cost/chunk_search.hpp"
#include "cgdp/data/image/image_dataset.hpp"

namespace cgdp {

struct TrainConfig {
  std::string model = "fashion_cnn";  // a path, or a name in models/
  // Empty: the model's data layers, else Fashion-MNIST (data_feeds.hpp). Given, it overrides the
  // data layers' sources.
  std::string data;
  std::string test_data;  // the test split's source; empty: --data's own test split
  // Image sources (folder:, list:): resize, crop, mirror, mean and scale. The trainer fills the
  // channels and size from the model's Input. The scale defaults to the IDX reader's 1/256.
  ImageOptions images = [] {
    ImageOptions o;
    o.transform.scale = kPixelScale;
    return o;
  }();
  // The image flags were given: they replace the model's transform_param (train_flags.cpp).
  bool images_given = false;
  // "shuffled" (a new permutation each epoch), "sequential" (the source's order), or empty: the
  // model's data layer decides as Caffe (Data: key order; ImageData, HDF5Data: their shuffle),
  // shuffled without one.
  std::string order;
  int64_t batch = 0;         // per worker; 0: the Input layer's first dimension
  int64_t global_batch = 0;  // alternatively: split over the workers (must divide evenly)
  int64_t test_batch = 0;    // 0: the TEST data layer's batch_size, else the per-worker batch
  int64_t iterations = 0;    // 0: from epochs
  double epochs = 0;         // used when iterations == 0
  int accumulate = 1;        // micro-batches whose gradients are summed per update (Caffe's iter_size)
  proto::SolverParameter solver;  // base_lr, lr_policy, momentum, weight_decay, ...
  // Caffe's NetState of each phase's net, merged with the model's own `state` (a solver's
  // train_state and test_state, --stage and --test-stage): which staged layers each builds.
  proto::NetState train_state, test_state;
  // A solver's second and later test nets (test_state and test_iter repeated): each is a TEST net
  // of its own stages, with its own data layer and batch, tested with the first (test_state,
  // test_iter) and reported by its number. iterations 0: as many samples as the first.
  struct MoreTestNet {
    proto::NetState state;
    int64_t iterations = 0;
    std::string model;  // a solver's test_net file; empty: the model's TEST phase
  };
  std::vector<MoreTestNet> more_test_nets;
  // A solver's first test_net file: the test net's own layers and data layer, sharing the
  // parameters by layer name; empty: the model's TEST phase.
  std::string test_model;
  uint64_t seed = 1;
  int64_t test_interval = 0;  // 0: once per epoch; < 0: only at the end
  int64_t test_samples = 0;   // 0: the whole test set
  int64_t test_iter = 0;      // > 0: test this many test batches (a solver's test_iter)
  bool test_initialization = false;  // also test before the first iteration (Caffe's default)
  int64_t display = 0;        // 0: about 20 plain lines per run (a terminal is live anyway); < 0: none
  int64_t average_loss = 0;   // > 0: the displayed loss is the mean of the last N iterations'
                              // (Caffe's average_loss); 0: the mean since the last line
  std::string metrics_path;
  std::string save_path;            // final parameters, safetensors
  int64_t snapshot_every = 0;       // 0: no checkpoints
  std::string snapshot_prefix;      // checkpoints go to <prefix>_iter_<N>.ckpt
  bool snapshot_after_train = false;  // also write one after the last iteration
  std::string resume_path;
  // Trained weights copied in by layer name before training (caffe_import/weights.hpp): Caffe's
  // -weights. Later files win; a --weights-map renames another framework's safetensors tensors.
  std::vector<std::string> weights;
  std::string weights_map;
  bool weights_allow_mismatch = false;  // re-initialise layers whose shapes differ (fine-tuning)
  bool plain_output = false;        // never use the live terminal line
  int threads = 0;                  // 0: OpenMP's default
  int loader_threads = 0;           // threads that decode each batch; 0: from the topology
  int prefetch = 1;                 // batches the loader prepares ahead of the one in use
  // CPU: every Convolution on im2col + GEMM (engine: CAFFE), not oneDNN. GEMM sums each image's
  // gradient in order, whatever the batch; oneDNN's blocking (and so its rounding) follows it.
  bool gemm_convolutions = false;
  // "fastest": activations between layers that run faster channel-blocked stay so
  // (tensor/channel_blocks.hpp); "nchw": every activation in Caffe's layout.
  std::string layout = "fastest";
  // The multiplying layers' arithmetic (layer_precision.hpp): "fp32", or "bf16"/"fp16" operands in
  // the multiplying layers with fp32 sums.
  std::string precision = "fp32";
  // cgdp test: a deploy net (no labels read) gets a loss and an Accuracy (add_scoring_layers).
  bool score_deploy_net = false;
  // Loss scaling (loss_scale.hpp): "auto" (dynamic in fp16), "off", "dynamic" or a fixed number;
  // a dynamic scale doubles after this many finite steps in a row.
  std::string loss_scale = "auto";
  int64_t loss_scale_growth_interval = 2000;

  // Data-parallel workers.
  int devices = 1;
  std::string device_kind = "cpu";  // cpu or cuda
  std::string device_kind_from = "--device-kind";  // what set it, for errors (a solver's field)
  // The memory a run may use per device, in GiB; 0: what is free (RAM, or the GPU's free memory).
  double device_memory_gb = 0;
  // "auto": a run that does not fit its memory plans its activations in an arena and offloads
  // some to pinned host memory (net/activation_plan.hpp); "off": it is refused.
  std::string offload = "auto";
  // In bf16/fp16: activations whose every backward reader rounds them to 16 bits anyway (or reads
  // their sign) wait in 16 bits between forward and backward ("exact"); so do BatchNorm's kept
  // normalised values, rounded ("on"); or all wait in fp32 ("off"); "auto": as on for CUDA
  // workers, and as exact for CPU workers when the run does not fit (packs_from_the_start).
  std::string pack_activations = "auto";
  // A layer may write its output over an input kept as a 16-bit copy (false: a test's reference).
  bool write_outputs_over_inputs = true;
  // CUDA libraries (cuda_options.hpp): TF32 in convolutions, cuDNN's scratch cap, and whether
  // cuDNN may pick non-deterministic algorithms.
  bool tf32 = false;
  int64_t cudnn_workspace_mb = 1024;
  bool nondeterministic = false;
  // cuDNN's convolution choices: read from this file when it exists (those problems are not
  // searched again), written back at the end with every choice the run made. Empty: neither.
  std::string cudnn_algorithms_path;
  std::string sync;                 // cgdp, ps0, local; empty: cgdp for > 1 device, else local
  // Chunk plan for cgdp (see chunk_plan.hpp), or "auto"; empty: default_chunk_spec(device kind).
  std::string chunk;
  // --chunk auto (train/chunk_autotuner.hpp): the profile predicted from (empty: measure one
  // first), the candidate plans (cost/plan_set.hpp; empty: the default set), the search settings.
  std::string profile_path;
  std::vector<std::string> chunk_plans;
  ChunkSearchOptions chunk_search;
  // cgdp: how InnerProduct weights travel (cost/fc_exchange.hpp): auto, dense or factors.
  std::string fc_exchange = "auto";
  // cgdp: the element type summed chunks travel in (sync/exchange_dtype.hpp): fp32, bf16, fp16.
  std::string exchange_dtype = "fp32";
  int host_threads = 0;             // aggregator threads; 0: one per worker (sync/placement.cpp)
  int sum_lanes = 1;                // chunks the aggregator sums at once, splitting its threads
  int chunk_piece_kb = 0;           // chunks copied and summed in pieces of this size; 0: whole
  // "per-worker": each worker's work is issued by its own host thread; "one": one thread issues
  // every worker in turn (the old way, for comparisons).
  std::string issue_threads = "per-worker";
  std::string timeline_path;        // Chrome trace of every stream
  bool record_timeline = false;     // keep the timeline in memory without writing it (profiling)
  bool phase_table = false;         // print the per-phase table at the end
  // Scale-out: `devices` workers on each of these hosts ("host:port", the same list on every
  // host); this process is rank `rank` and runs the shard on hosts[rank]. Empty: one host.
  std::vector<std::string> hosts;
  int rank = 0;
  std::string token_file;  // the cluster token; empty: $CGDP_CLUSTER_TOKEN
  double timeout_s = 30;   // a host or shard silent this long stops the run
  // Started by mpirun or srun without --hosts (launchers/launched_hosts.hpp): rank 0's
  // rendezvous address ("host:port"; empty: $CGDP_MASTER_ADDR), and the shard port of a host's
  // first rank (the k-th rank on a host listens at shard_port + k).
  std::string master;
  int shard_port = 29500;
  // Test knob (CPU backend): worker `fail_worker`'s device fails its copies after `fail_after_copies`.
  int fail_worker = -1;
  int64_t fail_after_copies = 0;
};

struct TrainResult {
  int64_t iterations = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  double train_seconds = 0;
  double images_per_s = 0;
};

}  // namespace cgdp
