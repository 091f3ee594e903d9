// Everything a training run is told by the command line (or a test).
#pragma once

#include <cstdint>
#include <string>

#include "cgdp.pb.h"

namespace cgdp {

struct TrainConfig {
  std::string model = "fashion_cnn";  // a path, or a name in models/
  std::string data = "idx:/usr/share/datasets/fashion-mnist";
  int64_t batch = 0;         // per worker; 0: the Input layer's first dimension
  int64_t global_batch = 0;  // alternatively: split over the workers (must divide evenly)
  int64_t test_batch = 0;    // 0: 100
  int64_t iterations = 0;    // 0: from epochs
  double epochs = 0;         // used when iterations == 0
  int accumulate = 1;        // micro-batches whose gradients are summed per update (Caffe's iter_size)
  proto::SolverParameter solver;  // base_lr, lr_policy, momentum, weight_decay, ...
  uint64_t seed = 1;
  int64_t test_interval = 0;  // 0: once per epoch; < 0: only at the end
  int64_t test_samples = 0;   // 0: the whole test set
  int64_t display = 0;        // 0: about 20 plain lines per run (a terminal is live anyway)
  std::string metrics_path;
  std::string save_path;            // final parameters, safetensors
  int64_t snapshot_every = 0;       // 0: no checkpoints
  std::string snapshot_prefix;      // checkpoints go to <prefix>_iter_<N>.ckpt
  std::string resume_path;
  bool plain_output = false;        // never use the live terminal line
  int threads = 0;                  // 0: OpenMP's default
  int loader_threads = 1;           // threads that fill each batch (large synthetic images)

  // Data-parallel workers.
  int devices = 1;
  std::string device_kind = "cpu";  // cpu or cuda
  // CUDA libraries (cuda_options.hpp): TF32 in convolutions, cuDNN's scratch cap, and whether
  // cuDNN may pick non-deterministic algorithms.
  bool tf32 = false;
  int64_t cudnn_workspace_mb = 1024;
  bool nondeterministic = false;
  std::string sync;                 // cgdp, ps0, local; empty: cgdp for > 1 device, else local
  std::string chunk = "layer";      // chunk plan for cgdp (see chunk_plan.hpp)
  int host_threads = 0;             // aggregator threads; 0: all cores
  std::string timeline_path;        // Chrome trace of every stream
  bool phase_table = false;         // print the per-phase table at the end
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
