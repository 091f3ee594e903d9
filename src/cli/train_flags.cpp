// The shared trainer flags: registration with CLI11 and the solver settings they resolve to.
#include "cli/train_flags.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <tuple>

#include "cgdp/caffe_import/solver_file.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/core/fit_int32.hpp"
#include "cgdp/data/image/mean_file.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/sync/host_aggregator.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

namespace {

// Starts from the solver file (if any), whose missing fields keep Caffe's defaults (momentum 0,
// no weight decay); flags the user typed override its fields. Without a file, the flags' values.
proto::SolverParameter solver_settings(const TrainFlags& f, const CLI::App& cmd) {
  proto::SolverParameter s;
  if (!f.solver_file.empty()) s = load_solver(f.solver_file);
  // A flag a command lacks (`cgdp test` has no --lr) leaves the file's field.
  auto given = [&](const char* flag) {
    const CLI::Option* option = cmd.get_option_no_throw(flag);
    return f.solver_file.empty() || (option && option->count() > 0);
  };
  if (given("--lr")) s.set_base_lr(static_cast<float>(f.lr));
  if (given("--momentum")) s.set_momentum(static_cast<float>(f.momentum));
  if (given("--weight-decay")) s.set_weight_decay(static_cast<float>(f.weight_decay));
  if (given("--lr-policy")) s.set_lr_policy(f.lr_policy);
  if (given("--gamma")) s.set_gamma(static_cast<float>(f.gamma));
  if (given("--power")) s.set_power(static_cast<float>(f.power));
  // These have no default of their own: the file's value, or Caffe's default, unless typed.
  auto typed = [&](const char* flag) {
    const CLI::Option* option = cmd.get_option_no_throw(flag);
    return option && option->count() > 0;
  };
  if (typed("--solver-type")) {
    s.set_type(f.solver_type);
    s.clear_solver_type();
  }
  if (typed("--clip-gradients")) s.set_clip_gradients(static_cast<float>(f.clip_gradients));
  if (typed("--delta")) s.set_delta(static_cast<float>(f.delta));
  if (typed("--momentum2")) s.set_momentum2(static_cast<float>(f.momentum2));
  if (typed("--rms-decay")) s.set_rms_decay(static_cast<float>(f.rms_decay));
  if (given("--stepsize") && f.stepsize > 0) s.set_stepsize(fit_int32(f.stepsize, "--stepsize"));
  if (given("--stepvalues") && !f.stepvalues.empty()) {
    s.clear_stepvalue();
    for (int64_t v : f.stepvalues) s.add_stepvalue(fit_int32(v, "--stepvalues"));
  }
  return s;
}

// CPUs in this process's affinity mask (what taskset or a cgroup leaves it), at least 1.
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

void add_image_flags(CLI::App* cmd, TrainFlags& f) {
  TrainConfig& c = f.config;
  cmd->add_option("--resize", f.resize, "Images: resize to HxW first (Caffe's new_height/new_width)");
  cmd->add_option("--crop", c.images.transform.crop_size,
                  "Images: crop to NxN (random when training, centred when testing)")
      ->check(kPositive);
  cmd->add_flag("--mirror", c.images.transform.mirror, "Images: mirror half of them at random");
  cmd->add_option("--augment", f.augment,
                  "Images: rrc:N for torchvision's recipe instead of Caffe's: RandomResizedCrop(N) "
                  "(scale 0.08-1, ratio 3/4-4/3, bilinear), flip with --mirror, RGB out; "
                  "the test split takes Resize(N*256/224) + CenterCrop(N)")
      ->excludes("--crop", "--resize");
  cmd->add_option("--mean-value", c.images.transform.mean_values,
                  "Images: subtract one value, or one per channel (B,G,R for colour, as Caffe; "
                  "R,G,B with --augment)")
      ->delimiter(',')
      ->check(kFinite);
  cmd->add_option("--std", c.images.transform.std_values,
                  "Images: then divide by one value, or one per channel, as torchvision's Normalize "
                  "in pixel units (e.g. 58.395,57.12,57.375); --pixel-scale then defaults to 1")
      ->delimiter(',');
  cmd->add_option("--mean-file", f.mean_file,
                  "Images: subtract this mean image (Caffe .binaryproto, 1 x C x H x W, before the crop)")
      ->excludes("--mean-value");
  cmd->add_flag("--skip-bad-images", c.images.skip_bad,
                "Images: replace an unreadable one by the next sample and report the count at the end");
  cmd->add_option("--pixel-scale", c.images.transform.scale,
                  "Images: multiply each (pixel - mean) by this (default 1/256, as the IDX reader)")
      ->check(kFinite);
  cmd->add_option(
         "--loader-threads", c.loader_threads,
         "Threads that decode each batch (default for image files: the cores near the GPUs "
         "left after one per worker and --host-threads, as cgdp topo shows; 1 for data in memory)")
      ->check(count_check(kMaxThreads));
}

void add_workload_flags(CLI::App* cmd, TrainFlags& f) {
  TrainConfig& c = f.config;
  cmd->add_option("-m,--model", c.model, "Model file, or a name from models/")->capture_default_str();
  cmd->add_option("-d,--data", c.data,
                  "idx:DIR, cifar10:DIR, folder:DIR (train/, val/ of class folders), "
                  "list:FILE[,ROOT] (Caffe's 'path label' lines), lmdb:DIR|TRAIN,VAL, "
                  "hdf5:LIST[,DATA,LABEL] (Caffe's HDF5Data files) or "
                  "synthetic[:C,H,W,K]; replaces a model's data layer source (default: the model's "
                  "data layers, else idx:/usr/share/datasets/fashion-mnist)")
      ->check(kNotEmpty);
  cmd->add_option("--test-data", c.test_data, "The test split's source (default: --data's)")
      ->check(kNotEmpty);
  cmd->add_option("--order", c.order,
                  "Training order: shuffled (a new permutation each epoch) or sequential (default: as "
                  "Caffe reads the model's data layer: Data in key order, ImageData/HDF5Data by their "
                  "shuffle; shuffled without one)")
      ->check(CLI::IsMember({"shuffled", "sequential"}));
  add_image_flags(cmd, f);
  cmd->add_option("-b,--batch", c.batch, "Batch size (default: the model's Input)")->check(kPositive);
  cmd->add_option("--global-batch", c.global_batch,
                  "Batch over all workers, split evenly (instead of --batch)")
      ->excludes("--batch")
      ->check(kPositive);
  cmd->add_option("-n,--devices", c.devices, "Data-parallel workers (devices)")->capture_default_str();
  cmd->add_flag("--oversubscribe", f.oversubscribe,
                "Allow more workers than CPU cores (cpu) or GPUs (cuda): they take turns");
  cmd->add_option("--device-memory-gb", c.device_memory_gb,
                  "Memory each device may use, checked before allocating (default: what is free)")
      ->check(kPositive);
  cmd->add_option(
         "--offload", c.offload,
         "auto: a run that does not fit the device keeps its activations in an arena "
         "planned by liveness and moves the largest to pinned host memory between forward "
         "and backward, then if need be the solver's history between steps, then (CPU, "
         "fp32 or bf16) the largest InnerProduct weights, streamed through the device in slices; "
         "off: refuse it")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  cmd->add_option(
         "--pack-activations", c.pack_activations,
         "With --precision bf16/fp16, exact: the activations whose backward readers round "
         "them to 16 bits anyway (or read only their sign) wait in 16 bits between forward "
         "and backward: half their memory, the same results; on: BatchNorm's normalised values "
         "too, rounded (gradients within 16-bit rounding, as PyTorch's AMP); off: all in fp32; "
         "auto: on for cuda, and exact for cpu when the run does not fit its memory (the passes "
         "take the layers' cores)")
      ->check(CLI::IsMember({"auto", "on", "exact", "off"}))
      ->capture_default_str();
  cmd->add_option("--device-kind", c.device_kind, "cpu, or cuda (workers share GPUs round-robin)")
      ->capture_default_str();
  cmd->add_option("--host-threads", c.host_threads,
                  "Threads that sum gradients on the host (default: one per worker, leaving a core "
                  "per worker)")
      ->check(count_check(kMaxThreads));
  cmd->add_option("--sum-lanes", c.sum_lanes,
                  cat("Chunks the host sums at once, each on --host-threads / lanes threads: helps "
                      "when chunks are too small to keep every thread busy (1 to ",
                      kMaxSumLanes, ", at most the host threads)"))
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxSumLanes));
  cmd->add_option("--chunk-piece-kb", c.chunk_piece_kb,
                  "cgdp on one host: copy each chunk to the host, sum it and send it back in "
                  "pieces of this many KiB as they land, so that each piece is summed while still "
                  "in cache and goes back while the next is copied (0: whole chunks)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--issue-threads", c.issue_threads,
                  "per-worker: each worker's streams get their own issuing thread; one: one thread "
                  "issues every worker in turn")
      ->capture_default_str()->check(CLI::IsMember({"per-worker", "one"}));
  // Each batch ahead is a pinned buffer of the whole batch: 64 is more than any loader keeps busy.
  cmd->add_option("--prefetch", c.prefetch,
                  "Batches the loader prepares ahead of the one in use (1 to 64)")
      ->capture_default_str()
      ->check(count_check(64));
  cmd->add_flag("--gemm-conv", c.gemm_convolutions,
                "CPU: run convolutions on im2col + OpenBLAS instead of oneDNN");
  cmd->add_option("--layout", c.layout,
                  "CPU: fastest (activations between oneDNN convolutions stay in the layout their "
                  "kernels read, NHWC or 16-channel blocks, through the pooling, LRN, BatchNorm, "
                  "Scale, ReLU, Eltwise, Split and Concat layers between them) or nchw (Caffe's "
                  "layout everywhere: a reorder at each oneDNN convolution's edges). CUDA in "
                  "bf16/fp16: fastest hands cuDNN a convolution's operands channels last (NHWC) "
                  "when its channels come in 8s, nchw as they are")
      ->capture_default_str()
      ->check(CLI::IsMember({"fastest", "nchw"}));
  cmd->add_option("--precision", c.precision,
                  "fp32, bf16 or fp16: convolutions, deconvolutions and inner products "
                  "multiply 16-bit operands with fp32 sums (CUDA: cuDNN's and cuBLAS's tensor "
                  "cores; CPU: oneDNN's bf16 kernels on AVX512_BF16 CPUs, elsewhere fp32 kernels "
                  "on rounded operands: a 16-bit run's numbers, not its speed)")
      ->capture_default_str();
  cmd->add_option(
         "--loss-scale", c.loss_scale,
         "auto (dynamic in fp16, off otherwise), off, dynamic (from 65536), dynamic:START, or "
         "a fixed scale >= 1: "
         "backward starts from the loss times it; a step whose summed gradient is not "
         "finite is skipped (dynamic: and halves the scale)")
      ->capture_default_str();
  cmd->add_option("--loss-scale-growth-interval", c.loss_scale_growth_interval,
                  "Finite steps in a row after which a dynamic loss scale doubles")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tf32", c.tf32, "CUDA: let fp32 convolutions use TF32 tensor cores (PyTorch's default)");
  cmd->add_option("--cudnn-workspace-mb", c.cudnn_workspace_mb,
                  "CUDA: the most scratch one convolution algorithm may use (MiB)")
      ->capture_default_str()->check(kNonNegative);
  cmd->add_option("--cudnn-algorithms", c.cudnn_algorithms_path,
                  "CUDA: read cuDNN's convolution choices from FILE if it exists (no search for "
                  "those), write them all back at the end (for runs on the same GPU model)");
  cmd->add_flag("--nondeterministic", c.nondeterministic,
                "CUDA: let cuDNN pick algorithms that are not bit-reproducible (sometimes faster)");
  cmd->add_option("--threads", c.threads, "CPU threads for compute (default: all cores)")
      ->check(count_check(kMaxThreads));
  cmd->add_option("--seed", c.seed, "Seed for initialisation, shuffling and dropout")->capture_default_str();
}

void add_solver_flags(CLI::App* cmd, TrainFlags& f) {
  cmd->add_option("--solver", f.solver_file,
                  "Caffe solver file: its net (relative to here, then to the file), schedule, "
                  "iterations, tests and snapshots; flags override its fields")
      ->check(CLI::ExistingFile);
  cmd->add_option("--lr", f.lr, "Base learning rate")->capture_default_str()->check(kPositive);
  cmd->add_option("--lr-policy", f.lr_policy, "fixed, step, exp, inv, multistep, poly or sigmoid")->capture_default_str();
  cmd->add_option("--gamma", f.gamma, "Decay factor for step, exp, inv, multistep; the slope for sigmoid")->capture_default_str();
  cmd->add_option("--stepsize", f.stepsize, "Iterations between decays (step)");
  cmd->add_option("--stepvalues", f.stepvalues, "Iterations at which to decay (multistep)")->delimiter(',');
  cmd->add_option("--power", f.power, "Exponent for inv and poly")->capture_default_str();
  cmd->add_option("--momentum", f.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", f.weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--solver-type", f.solver_type,
                  "SGD (default), Nesterov, AdaGrad, RMSProp, AdaDelta or Adam, with Caffe's update rules");
  cmd->add_option("--clip-gradients", f.clip_gradients,
                  "Scale the gradient down to this L2 norm when it is larger (Caffe's clip_gradients)");
  cmd->add_option("--delta", f.delta, "AdaGrad, RMSProp, AdaDelta, Adam: the denominators' epsilon (default 1e-8)");
  cmd->add_option("--momentum2", f.momentum2, "Adam: beta2 (default 0.999); --momentum is beta1");
  cmd->add_option("--rms-decay", f.rms_decay, "RMSProp: the squared gradients' decay (default 0.99)");
}

RandomResizedCrop parse_augment(const std::string& text) {
  int size = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "rrc:%d%c", &size, &extra) != 1 || size <= 0)
    throw UsageError(cat("--augment: expected rrc:N with N > 0 (RandomResizedCrop to NxN), got '", text, "'"));
  RandomResizedCrop rrc;
  rrc.size = size;
  return rrc;
}

void check_worker_count(const TrainConfig& c, bool oversubscribe) {
  if (oversubscribe) return;
  if (c.device_kind == "cpu") {
    const int cores = usable_cores();
    if (c.devices > cores)
      throw UsageError(cat("--devices ", c.devices, ": more CPU workers than the ", cores,
                           " cores this process may use; they would take turns (add "
                           "--oversubscribe to run them anyway)"));
  } else if (c.device_kind == "cuda") {
    const int gpus = cuda_device_count();
    if (gpus > 0 && c.devices > gpus)
      throw UsageError(cat("--devices ", c.devices, ": more workers than the ", gpus,
                           " GPUs; they would share them (add --oversubscribe to run them anyway)"));
  }
}

void resolve_image_flags(const TrainFlags& f, const CLI::App& cmd, TrainConfig& config) {
  if (!f.resize.empty())
    std::tie(config.images.resize_height, config.images.resize_width) = parse_size(f.resize, "--resize");
  if (!f.mean_file.empty()) load_mean_file(f.mean_file, config.images.transform);
  if (!f.augment.empty()) config.images.random_resized_crop = parse_augment(f.augment);
  for (float s : config.images.transform.std_values)
    if (!(s > 0)) throw UsageError(cat("--std: expected values > 0, got ", s));
  if (!config.images.transform.std_values.empty() && cmd.count("--pixel-scale") == 0)
    config.images.transform.scale = 1.f;
}

// The long names of the flags the user typed ("--lr"): a solver file does not override them.
std::set<std::string> given_flags(const CLI::App& cmd) {
  std::set<std::string> given;
  for (const CLI::Option* option : cmd.get_options())
    if (option->count() > 0)
      for (const std::string& name : option->get_lnames()) given.insert("--" + name);
  return given;
}

TrainConfig resolved_config(const TrainFlags& f, const CLI::App& cmd) {
  TrainConfig config = f.config;
  for (const char* flag : {"--resize", "--crop", "--mirror", "--augment", "--mean-value", "--std",
                           "--mean-file", "--pixel-scale"})
    if (cmd.count(flag) > 0) config.images_given = true;
  resolve_image_flags(f, cmd, config);
  config.solver = solver_settings(f, cmd);
  for (const std::string& stage : f.stages) config.train_state.add_stage(stage);
  for (const std::string& stage : f.test_stages) config.test_state.add_stage(stage);
  if (!f.solver_file.empty()) apply_solver_file(config.solver, f.solver_file, given_flags(cmd), config);
  return config;
}

}  // namespace cgdp::cli
