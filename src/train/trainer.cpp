// The training loop over N workers: one iteration = accumulate x (load, forward, backward) on
// every worker, the sync scheme's exchange and update, then one synchronization; tests,
// progress, snapshots around it.
#include "cgdp/train/trainer.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <optional>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/core/fit_int32.hpp"
#include "cgdp/cost/fc_exchange.hpp"
#include "cgdp/cost/profile_match.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "cgdp/sync/exchanged_chunks.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "cgdp/trace/stream_trace.hpp"
#include "cgdp/train/issue_threads.hpp"
#include "cgdp/train/run_notes.hpp"

namespace cgdp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Classes the model predicts: the channel count of its loss layer's first bottom.
int model_classes(Net<float>& net, const std::string& path) {
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).is_loss()) return static_cast<int>(net.bottoms(i)[0]->count(1));
  const std::string model = net.name().empty() ? "the model" : cat("model '", net.name(), "'");
  throw ModelError(cat(path, ": ", model, " has no loss layer to train (such as SoftmaxWithLoss) ",
                       "in its TRAIN phase"));
}

// Per-worker batch from --batch / --global-batch (over every device of every host), checked
// against the device count.
int64_t per_worker_batch(const TrainConfig& c, int64_t model_batch) {
  if (c.devices < 1) throw UsageError(cat("--devices must be at least 1, got ", c.devices));
  if (c.global_batch > 0) {
    const int64_t workers = c.devices * std::max<int64_t>(1, static_cast<int64_t>(c.hosts.size()));
    if (workers > c.global_batch)
      throw UsageError(cat(workers, " workers are more than the ", c.global_batch,
                           " samples of the global batch"));
    if (c.global_batch % workers != 0)
      throw UsageError(cat("--global-batch ", c.global_batch, " does not split evenly over ",
                           workers, " workers"));
    return c.global_batch / workers;
  }
  return c.batch > 0 ? c.batch : model_batch;
}

// The first dimension of the data top of the Input `phase` builds (its default batch size).
int64_t declared_batch_size(const proto::NetParameter& model, Phase phase) {
  const proto::NetParameter net = filter_phase(model, phase);
  for (const auto& layer : net.layer())
    if (layer.type() == "Input" && layer.input_param().shape_size() > 0 &&
        layer.input_param().shape(0).dim_size() > 0)
      return layer.input_param().shape(0).dim(0);
  return 0;  // the net reports the missing Input
}

DeviceKind parse_device_kind(const std::string& name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "cuda") return DeviceKind::Cuda;
  throw UsageError(cat("--device-kind: unknown kind '", name, "' (known: cpu, cuda)"));
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, FILE* out, ChunkProfileSource measure_profile)
    : config_(config), out_(out), timeline_(config.record_timeline || !config.timeline_path.empty()) {
  if (config.threads > 0) {
    omp_set_num_threads(config.threads);
    openblas_set_num_threads(config.threads);
  }
  if (config.accumulate < 1) throw UsageError("--accumulate must be at least 1");
  const bool scale_out = !config.hosts.empty();
  const SyncKind sync = config.sync.empty() ? (config.devices > 1 || scale_out ? SyncKind::Cgdp : SyncKind::Local)
                                            : parse_sync_kind(config.sync);
  if (scale_out && sync != SyncKind::Cgdp)
    throw UsageError(cat("--hosts needs --sync cgdp (the shards sum the hosts' chunks), not ", config.sync));
  if (config.rank < 0 || config.rank >= num_hosts())
    throw UsageError(cat("--rank ", config.rank, " is outside the ", num_hosts(), " hosts of --hosts"));
  config_.timeline_path = rank_file_path(config.timeline_path, config.rank);
  if (config.rank != 0) config_.metrics_path.clear();  // the job's metrics come from rank 0
  const DeviceKind device_kind = parse_device_kind(config.device_kind);
  if (config.cudnn_workspace_mb < 0) throw UsageError("--cudnn-workspace-mb must be >= 0");
  set_cuda_options({config.tf32, static_cast<size_t>(config.cudnn_workspace_mb) << 20,
                    !config.nondeterministic});
  set_layer_precision(parse_precision(config.precision));
  set_channel_blocks_enabled(config.layout != "nchw");
  model_path_ = find_model_file(config.model);
  model_ = load_model(model_path_);
  if (config.score_deploy_net) scoring_note_ = add_scoring_layers(model_, model_path_);
  if (config.test_model.empty()) {
    feeds_ = plan_data_feeds(model_, model_path_, config);
    require_test_net(feeds_, model_path_);
  } else {  // a solver's train_net and test_net: each file feeds its own net
    feeds_ = plan_data_feeds(model_, model_path_, config, FeedPhases::kTrainOnly);
    test_model_path_ = find_model_file(config.test_model);
    test_model_ = load_model(test_model_path_);
    const DataFeeds test =
        plan_data_feeds(test_model_, test_model_path_, config, FeedPhases::kTestOnly);
    require_test_net(test, test_model_path_);
    feeds_.test = test.test;
    if (config.gemm_convolutions) use_gemm_convolutions(test_model_);
  }
  check_outputs();
  std::optional<Profile> profile;  // --chunk auto's, measured before this trainer's workers exist
  if (config.chunk == "auto") {
    if (sync != SyncKind::Cgdp)
      throw UsageError(
          cat("--chunk auto searches cgdp's chunk plans; --sync ", to_string(sync), " has none"));
    if (scale_out)  // every host's shards were set up for one plan
      throw UsageError(
          "--chunk auto does not work with --hosts yet: give a plan (--chunk layer, K, bytes:MB, "
          "b1,b2,...)");
    config.chunk_search.check();
    profile = chunk_profile(config, measure_profile);
  }
  if (config.gemm_convolutions) use_gemm_convolutions(model_);
  per_worker_batch_ = per_worker_batch(config, declared_batch_size(model_, Phase::Train));
  test_batch_ = test_batch_size(feeds_, config.test_batch, per_worker_batch_);
  load_cudnn_algorithms();  // before the estimate: stored choices need no search's scratch
  if (device_kind == DeviceKind::Cuda && cuda_device_count() == 0)  // why, before anything asks
    throw DeviceError(cat(
        config.device_kind_from == "--device-kind" ? "--device-kind cuda" : config.device_kind_from,
        ": ", cuda_unavailable_reason()));
  std::vector<DeviceRef> refs;  // before the estimate: the cost model's choices know the threads
  const int gpus = device_kind == DeviceKind::Cuda ? cuda_device_count() : 0;
  for (int w = 0; w < config.devices; ++w) refs.push_back(worker_device(w, device_kind, gpus));
  placement_ = plan_placement(Topology::discover(), refs, config_.host_threads,
                              config_.loader_threads, sync == SyncKind::Cgdp);
  check_memory(sync, device_kind, profile ? &*profile : nullptr);
  workers_ = make_workers(config.devices, device_kind, model_, per_worker_batch_, config.seed,
                          model_path_, config.accumulate, activation_memory_);
  if (config.fail_worker >= 0) inject_fault(config.fail_worker, config.fail_after_copies);
  if (config.issue_threads != "per-worker" && config.issue_threads != "one")
    throw UsageError(
        cat("--issue-threads must be per-worker or one, not '", config.issue_threads, "'"));
  issuers_ = std::make_unique<IssueThreads>(num_workers(), config.issue_threads == "per-worker",
                                            [this](int w) { bind_issuing_thread(w); });
  Net<float>& net0 = net();
  const bool own_file = !config.test_model.empty();  // a solver's test_net
  test_net_ = make_test_net(own_file ? test_model_ : model_, net0, net0.device(), test_batch_,
                            config.seed, own_file ? test_model_path_ : model_path_);
  build_more_test_nets();
  load_initial_weights();
  const Shape in = net0.input_data().shape();
  if (in.size() != 4)
    throw ModelError(cat(model_path_, ": the Input's data top must be N x C x H x W, got ", shape_string(in)));
  const int classes = model_classes(net0, model_path_);
  SyntheticSpec synthetic{in[1], in[2], in[3], classes, 60000, config.seed};
  auto completed = [&](ImageOptions images) {
    images.channels = static_cast<int>(in[1]);
    images.height = static_cast<int>(in[2]);
    images.width = static_cast<int>(in[3]);
    images.seed = config.seed;
    images.classes = classes;
    return images;
  };
  train_data_ = open_feed(feeds_.train, Split::Train, synthetic, completed(feeds_.train.images), per_worker_batch_);
  test_data_ = open_feed(feeds_.test, Split::Test, synthetic, completed(feeds_.test.images), test_batch_);
  for (MoreTest& t : more_tests_)
    t.data = open_feed(t.feed, Split::Test, synthetic, completed(t.feed.images), t.batch);
  check_data_fits_model();
  const int64_t per_update = per_worker_batch_ * total_workers() * config.accumulate;
  max_iterations_ = config.iterations > 0
                        ? config.iterations
                        : static_cast<int64_t>(std::ceil(config.epochs * static_cast<double>(train_data_->size()) /
                                                         static_cast<double>(per_update)));
  if (max_iterations_ <= 0) throw UsageError("nothing to train: give --iterations or --epochs > 0");
  // Caffe's solver counts iterations in 32 bits (max_iter, poly's horizon).
  fit_int32(max_iterations_, config.iterations > 0 ? "--iterations" : "iterations of --epochs");
  make_scheme(sync, profile ? &*profile : nullptr);
  start_loss_scale(layer_precision());
  if (!config.resume_path.empty()) resume(config.resume_path);  // its choices win over the file's
  if (cluster_) agree_with_other_hosts();
  LoaderOptions lo;
  lo.global_batch = per_worker_batch_ * total_workers();
  lo.slice = host_slice(rank(), num_hosts(), num_workers(), per_worker_batch_);
  lo.seed = config_.seed;
  lo.order = train_order_ = training_order(feeds_.train, config.order);
  lo.start = start_position_;
  if (config.loader_threads < 0) throw UsageError("--loader-threads must be at least 1 (0: from the topology)");
  if (config.prefetch < 1) throw UsageError("--prefetch must be at least 1");
  lo.threads = loader_threads(*train_data_);
  lo.buffers = config.prefetch + 1;
  lo.thread_start = loader_binding();
  loader_ = std::make_unique<BatchLoader>(train_data_, lo, *workers_[0].device);  // pinned for GPUs
}

// --weights: every worker starts from the files' blobs, copied by layer name.
void Trainer::load_initial_weights() {
  if (config_.weights.empty()) return;
  if (!config_.resume_path.empty())
    throw UsageError("give --weights or --resume, not both: a checkpoint holds its own parameters");
  const std::map<std::string, std::string> names =
      config_.weights_map.empty() ? std::map<std::string, std::string>{} : read_weights_map(config_.weights_map);
  std::vector<StoredWeights> files;
  for (const std::string& path : config_.weights) files.push_back(read_weights_file(path, names));
  WeightsReport report;
  for (Worker& w : workers_) report = load_weights(*w.net, files, config_.weights_allow_mismatch);
  weights_note_ = cat("cgdp: ", report.summary());
  weights_report_ = report;
}

// After a failure, streams may still hold work that refers to the scheme's events and buffers:
// stop the aggregator, then let every stream run out, before any member is destroyed.
Trainer::~Trainer() {
  if (scheme_) scheme_->shutdown();
  for (Worker& w : workers_)
    for (Stream* s : {w.compute.get(), w.d2h.get(), w.h2d.get()}) try {
        s->synchronize();
      } catch (...) {  // the failure was reported where it happened
      }
  // After a shard failed, ZeroMQ may still hold a push that reads the scheme's sum buffer: close
  // the cluster's sockets (its context waits for them) before the scheme frees that buffer.
  cluster_.reset();
}

// Measures the run on a MeasuringDevice and refuses it, before any real allocation, when it does
// not fit the free memory (or --device-memory-gb).
void Trainer::check_memory(SyncKind sync, DeviceKind kind, const Profile* chunk_profile) {
  if (config_.offload != "auto" && config_.offload != "off")
    throw UsageError(cat("--offload must be auto or off, not '", config_.offload, "'"));
  const ConvAlgorithmTable* choices = stored_cudnn_choices(kind);
  const Packing pack = packing_of(config_.pack_activations, kind);
  const ExchangeDtype dtype = parse_exchange_dtype(config_.exchange_dtype);
  const auto measure = [&](ActivationMemoryPlan activations) {
    activations.pack = pack;
    activations.write_over = config_.write_outputs_over_inputs;
    MemoryEstimate m = estimate_memory(
        model_, model_path_, per_worker_batch_, test_batch_, config_.devices, sync,
        make_solver_settings(config_.solver, "solver settings").histories(),
        config_.test_model.empty() ? nullptr : &test_model_, test_model_path_, activations, kind);
    // One partial sum per bit of the last micro-batch before the final one (gradient_fold.cpp).
    m.fold = config_.accumulate > 1
                 ? std::bit_width(static_cast<unsigned>(config_.accumulate - 1)) * m.gradients
                 : 0;
    add_cuda_scratch(m, kind, config_.cudnn_workspace_mb, layer_precision(), choices,
                     choices ? cuda_gpu_model(0) : "");
    add_exchange_buffers(m, sync, dtype);
    return m;
  };
  const auto estimate = [&](const ActivationMemoryPlan& activations) {
    MemoryEstimate m = measure(activations);
    add_factor_buffers(m, sync, factored_, config_.accumulate, total_workers(), dtype);
    return m;
  };
  activation_memory_ = default_activation_memory(layer_precision(), config_.pack_activations, kind);
  activation_memory_.write_over = config_.write_outputs_over_inputs;
  memory_ = measure(activation_memory_);
  if (sync == SyncKind::Cgdp) factored_ = choose_factored_layers(memory_, kind, chunk_profile);
  add_factor_buffers(memory_, sync, factored_, config_.accumulate, total_workers(), dtype);
  if (config_.device_memory_gb < 0)
    throw UsageError(cat("--device-memory-gb must be > 0, got ", config_.device_memory_gb));
  const bool given = config_.device_memory_gb > 0;
  const int64_t budget = given ? static_cast<int64_t>(config_.device_memory_gb * (1LL << 30))
                               : free_memory_bytes(kind);
  const std::string budget_is =
      given ? cat("--device-memory-gb ", config_.device_memory_gb)
            : (kind == DeviceKind::Cuda ? "the GPU's free memory" : "the free RAM (MemAvailable)");
  const BudgetScope scope = given ? BudgetScope::Device : BudgetScope::WholeRun;
  const int gpus = kind == DeviceKind::Cuda ? cuda_device_count() : 0;
  if (budget >= 0 && needed_bytes(memory_, kind, gpus, scope) > budget &&
      config_.offload == "auto") {
    std::optional<Profile> profile;  // picks the cheaper plan, and predicts its cost
    if (!config_.profile_path.empty()) profile = read_profile(config_.profile_path);
    const FittedMemory fit =
        fit_offload(estimate, kind, gpus, budget, scope, profile ? &*profile : nullptr);
    activation_memory_ = fit.activations;
    activation_memory_.pack = pack;
    activation_memory_.write_over = config_.write_outputs_over_inputs;
    memory_ = fit.estimate;
    offload_note_ = describe_offload(memory_);
    if ((memory_.offloaded > 0 || memory_.history_on_host() || memory_.streamed > 0) && profile) {
      const OffloadPassCost cost = predict_offload(memory_, *profile);
      char slower[32];
      std::snprintf(slower, sizeof slower, "%.1f%%", 100 * cost.slowdown());
      offload_note_ += cat("; predicted ", slower, " slower per pass (", config_.profile_path, ")");
    }
  }
  if (offload_note_.empty() && memory_.packed > 0) offload_note_ = describe_offload(memory_);
  check_memory_fits(memory_, kind, gpus, budget, budget_is, scope);
}

// cuDNN's choices that the workers will find instead of searching (--cudnn-algorithms, or this
// process's searches), when every GPU in use is of one model. A resume brings its checkpoint's
// later, which may ask for more scratch: then, and on other GPUs, the searches' cap counts.
const ConvAlgorithmTable* Trainer::stored_cudnn_choices(DeviceKind kind) const {
  if (kind != DeviceKind::Cuda || !config_.resume_path.empty()) return nullptr;
  const int used = std::min(config_.devices, cuda_device_count());
  for (int g = 1; g < used; ++g)
    if (cuda_gpu_model(g) != cuda_gpu_model(0)) return nullptr;
  return &ConvAlgorithmTable::process();
}

void Trainer::inject_fault(int worker, int64_t after_copies) {
  if (worker >= num_workers()) throw UsageError(cat("no worker ", worker, " to fail"));
  auto* cpu = dynamic_cast<CpuDevice*>(workers_[worker].device.get());
  if (!cpu) throw UsageError("fault injection needs CPU devices");
  cpu->fail_copies_after(after_copies);
}

// --chunk auto's profile: read from config.profile_path, else measured now.
Profile Trainer::chunk_profile(const TrainConfig& config, const ChunkProfileSource& measure) {
  if (!config.profile_path.empty()) {
    profile_note_ = cat("profile ", config.profile_path);
    return read_profile(config.profile_path);
  }
  if (!measure)
    throw UsageError("--chunk auto needs a profile here: give --profile P.json (cgdp profile)");
  const auto start = std::chrono::steady_clock::now();
  Profile profile = measure(config);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds);
  profile_note_ = cat("profile measured in ", text, " s");
  return profile;
}

void Trainer::make_scheme(SyncKind kind, const Profile* profile) {
  SyncOptions options;
  param_layers_ = cgdp::param_layers(net());
  if (profile) {
    check_profile_matches(*profile, net());
    chunk_tuner_ = std::make_unique<ChunkAutoTuner>(config_, *profile, param_layers_, num_workers(),
                                                    per_worker_batch_);
    options.plan = chunk_tuner_->initial_plan();
  } else if (kind == SyncKind::Cgdp) {
    options.plan = make_chunk_plan(
        param_layers_, config_.chunk.empty() ? default_chunk_spec(workers_[0].device->kind()) : config_.chunk);
  }
  if (kind == SyncKind::Cgdp) {
    plan_description_ = describe(options.plan, param_layers_);
    CGDP_ASSERT(factored_.size() == param_layers_.size());
    for (size_t i = 0; i < factored_.size(); ++i)  // a weight streamed from the host is not
      factored_[i] = factored_[i] && param_layers_[i].factorable();
    factors_description_ = cat(describe_factored(param_layers_, factored_), ", ", factors_reason_);
    options.factored = factored_;
  }
  if (!config_.hosts.empty()) {
    join_cluster(options.plan, options.factored);
    options.reducer = cluster_.get();
  }
  placement_summary_ = cat(placement_.single_node ? "single NUMA node" : "several NUMA nodes");
  options.host_threads = sum_threads();
  options.sum_lanes = config_.sum_lanes;
  if (kind == SyncKind::Cgdp && (options.sum_lanes < 1 || options.sum_lanes > options.host_threads))
    throw UsageError(cat("--sum-lanes ", options.sum_lanes, ": expected 1 to the ",
                         options.host_threads, " host summing threads (raise --host-threads)"));
  options.chunk_piece_kb = config_.chunk_piece_kb;
  if (options.chunk_piece_kb > 0 && kind != SyncKind::Cgdp)
    throw UsageError(cat("--chunk-piece-kb ", options.chunk_piece_kb,
                         " cuts cgdp's chunks; --sync ", to_string(kind), " has none"));
  if (options.chunk_piece_kb > 0 && options.reducer)
    throw UsageError(cat("--chunk-piece-kb ", options.chunk_piece_kb,
                         ": across hosts the chunks go whole, for now; leave it out with --hosts"));
  options.exchange_dtype = parse_exchange_dtype(config_.exchange_dtype);
  if (options.exchange_dtype != ExchangeDtype::Fp32 && kind != SyncKind::Cgdp)
    throw UsageError(cat("--exchange-dtype ", config_.exchange_dtype,
                         " narrows cgdp's exchange; --sync ", to_string(kind), " has none"));
  if (kind == SyncKind::Cgdp) {
    options.micro_batches = config_.accumulate;
    options.aggregator_cpus = placement_.aggregator_cpus();
    placement_summary_ +=
        cat(", aggregator: ", options.host_threads, " thread", options.host_threads == 1 ? "" : "s",
            options.sum_lanes > 1 ? cat(" in ", options.sum_lanes, " sum lanes") : "",
            options.chunk_piece_kb > 0 ? cat(", chunks in ", options.chunk_piece_kb, " KiB pieces")
                                       : "",
            " on cpus ", options.aggregator_cpus.to_string());
  }
  const int loaders = loader_threads(*train_data_);
  placement_summary_ += cat(", loader: ", loaders, " thread", loaders == 1 ? "" : "s", " on cpus ",
                            placement_.loader_cpus.to_string(), " (",
                            loaders == placement_.loader_threads ? placement_.loader_reason
                                                                  : "data in memory: one copies it",
                            ")");
  proto::SolverParameter solver = config_.solver;
  if (!solver.has_max_iter()) solver.set_max_iter(static_cast<int32_t>(max_iterations_));  // poly's horizon
  options.lr = make_lr_policy(solver, "solver settings");
  solver.set_iter_size(config_.accumulate);  // clip_gradients measures over the micro-batches
  options.solver = make_solver_settings(solver, "solver settings");
  options.history = memory_.history_on_host() ? HistoryPlace::Host : HistoryPlace::Device;
  scheme_ = make_sync_scheme(kind, sync_workers(), options, timeline_);
}

// --fc-exchange auto: with a profile the cost model chooses (cost/fc_exchange.hpp); without one,
// Poseidon's byte rule on CUDA (over every host's workers, whose rows each worker receives), and
// dense on the CPU backend. Across hosts the model needs the profile's network to weigh them.
// Chosen on the estimate's net, before the workers exist: their memory counts what it sends.
std::vector<bool> Trainer::choose_factored_layers(const MemoryEstimate& m, DeviceKind kind,
                                                  const Profile* profile) {
  const FcExchange mode = parse_fc_exchange(config_.fc_exchange);
  const int64_t samples = per_worker_batch_ * config_.accumulate;
  const bool model_knows_network =
      num_hosts() == 1 || (profile && profile->network && profile->network->gbps > 0);
  if (mode == FcExchange::Auto && profile && model_knows_network) {
    check_profile_matches(*profile, m.layer_names, m.params);
    const ChunkPlan plan =
        ChunkAutoTuner(config_, *profile, m.params, config_.devices, per_worker_batch_)
            .initial_plan();
    WhatIf what_if;
    what_if.batch = static_cast<int>(per_worker_batch_);
    what_if.host_threads = sum_threads();
    if (num_hosts() > 1) what_if.hosts = num_hosts();
    CostInputs in = make_cost_inputs(*profile, m.params, config_.devices, what_if);
    in.local_when_alone = false;
    set_exchange_dtype(in, *profile, parse_exchange_dtype(config_.exchange_dtype));
    factors_reason_ = "the cost model's choice with the profile";
    return choose_factored(in, plan, mode);
  }
  factors_reason_ = mode != FcExchange::Auto  ? cat("--fc-exchange ", to_string(mode))
                    : kind == DeviceKind::Cpu ? "dense on CPU devices without a profile"
                    : !profile                ? "Poseidon's byte rule (no profile)"
                                              : "Poseidon's byte rule (the profile has no network)";
  return factored_without_model(m.params, mode, kind, samples, total_workers());
}

void Trainer::set_chunk_plan(const ChunkPlan& plan) {
  scheme_->set_chunk_plan(plan);
  plan_description_ = describe(plan, param_layers_);
}

// Starts this host's shard and connects to every host's (waiting for them to start).
void Trainer::join_cluster(const ChunkPlan& plan, const std::vector<bool>& factored) {
  ClusterConfig c;
  c.hosts = parse_host_list(config_.hosts);
  c.rank = config_.rank;
  c.token = load_cluster_token(config_.token_file);
  if (!(config_.timeout_s > 0)) throw UsageError(cat("--timeout-s must be > 0, got ", config_.timeout_s));
  c.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(config_.timeout_s * 1000)));
  // What the aggregator pushes: its chunks' summed elements, and each host's block of every
  // factored weight's rows (exchanged_chunks.hpp).
  std::vector<FactorBlock> blocks;
  const int64_t samples = per_worker_batch_ * config_.accumulate;
  const ExchangeDtype dtype = parse_exchange_dtype(config_.exchange_dtype);
  for (size_t i = 0; i < factored.size(); ++i)
    if (factored[i]) {
      const FactorShape& f = param_layers_[i].factors;
      const int64_t rows = f.rows * samples;
      blocks.push_back({rows * f.outputs, rows * f.inputs, num_workers(), dtype});
    }
  ReducedChunks chunks =
      reduced_chunks(exchanged_spans(plan, param_layers_, factored), blocks, num_hosts());
  c.chunk_sizes = std::move(chunks.sizes);
  c.chunk_owners = std::move(chunks.owners);
  for (const auto& [name, blob] : net().state_blobs()) c.state_floats += blob->count() * num_workers();
  c.sum_threads = config_.host_threads;
  FILE* out = out_;
  c.log = [out](const std::string& line) {
    std::fprintf(out, "cgdp shard: %s\n", line.c_str());
    std::fflush(out);
  };
  cluster_ = std::make_unique<Cluster>(std::move(c));
}

// Every host must start from the same iteration and data position with the same settings, or the
// shards would sum gradients of different steps.
void Trainer::agree_with_other_hosts() {
  const int64_t start = workers_[0].solver->iteration();
  const proto::SolverParameter& s = config_.solver;
  std::string schedule = cat(s.lr_policy(), " gamma ", s.gamma(), " power ", s.power(),
                             " stepsize ", s.stepsize(), " max_iter ", s.max_iter(), " stepvalues");
  for (int32_t v : s.stepvalue()) schedule += cat(" ", v);
  cluster_->agree(
      {{"start iteration", start},
       Agreed::digest("model", net().fingerprint()),
       Agreed::digest("training data", content_summary(*train_data_)),
       Agreed::digest("test data", content_summary(*test_data_)),
       Agreed::real("base learning rate (--lr)", s.base_lr()),
       Agreed::digest("learning-rate schedule (--lr-policy and its settings)", schedule),
       Agreed::real("momentum (--momentum)", s.momentum()),
       Agreed::real("weight decay (--weight-decay)", s.weight_decay()),
       Agreed::digest("exchange dtype (--exchange-dtype)", config_.exchange_dtype),
       Agreed::digest("layer precision (--precision)", config_.precision),
       Agreed::digest("loss scale (--loss-scale)",
                      cat(config_.loss_scale, "/", config_.loss_scale_growth_interval)),
       {"data epoch", start_position_.epoch},
       {"data offset", start_position_.offset},
       {"seed", static_cast<int64_t>(config_.seed)},
       {"devices per host", num_workers()},
       {"batch per device", per_worker_batch_},
       {"accumulated micro-batches", config_.accumulate},
       {"iterations", max_iterations_},
       {"test interval", config_.test_interval},
       {"snapshot interval", config_.snapshot_every}});
}

void Trainer::check_data_fits_model() {
  Net<float>& net0 = net();
  const Shape in = net0.input_data().shape();
  const Shape sample = train_data_->sample_shape();
  if (Shape(in.begin() + 1, in.end()) != sample)
    throw ModelError(cat(model_path_, ": the model's input is ", shape_string({in[1], in[2], in[3]}),
                         " per sample but ", train_data_->describe(), " gives ", shape_string(sample)));
  if (!net0.input_label()) return;  // it learns from its data alone (an autoencoder)
  const int classes = model_classes(net0, model_path_);
  if (train_data_->num_classes() > classes)
    throw ModelError(cat(model_path_, ": the model predicts ", classes, " classes but ",
                         train_data_->describe(), " has labels up to ",
                         train_data_->num_classes() - 1));
}

double Trainer::train_iteration() {
  const int64_t it = iteration();
  for (Worker& w : workers_) {
    mark(*w.compute, timeline_, &w.marks.begin);
    scheme_->begin_iteration(w, it);
    traced(*w.compute, timeline_, w.index, "compute", "zero gradients", "update",
           [&] { w.net->zero_param_diffs(*w.compute); });
  }
  for (int k = 0; k < config_.accumulate; ++k) {
    const Batch& batch = loader_->next();
    const bool last = k + 1 == config_.accumulate;
    issuers_->run([&](int w) { issue_micro_batch(workers_[w], batch, k, it); });
    if (!last)  // the loader reuses the batch's memory on the next call
      for (Worker& w : workers_) w.input_loaded->synchronize();
  }
  scheme_->exchange_and_update(
      sync_workers(), 1.0 / (total_workers() * config_.accumulate * loss_scale_.value()), it);
  synchronize_all(workers_, it);
  loss_scale_line_ = record_loss_scale(it + 1);
  double loss = 0;
  for (const Worker& w : workers_)
    for (int k = 0; k < config_.accumulate; ++k) loss += w.loss(k);
  loss /= num_workers() * config_.accumulate;
  check_loss(loss, it + 1);  // counted from 1, as progress counts
  return loss;
}

// Runs on worker w's issuing thread; the host-side span goes on the worker's "issue" track, so
// the timeline shows the workers being issued at once.
void Trainer::issue_micro_batch(Worker& w, const Batch& batch, int micro, int64_t it) {
  const Timeline::Scope issuing(timeline_, w.index, "issue", {"issue micro-batch ", micro}, "issue",
                                {{"thread", timeline_.enabled() ? issuing_thread_id() : 0}});
  const int64_t row = w.index * per_worker_batch_;
  w.issue_input(batch, row, timeline_);
  const RunContext ctx{Phase::Train, w.compute.get(), config_.seed, it, batch.first_sample + row,
                       micro};
  w.issue_forward(ctx, timeline_);
  w.issue_loss_readback(micro);
  std::function<void(int)> hook;
  if (micro + 1 == config_.accumulate) hook = [this, &w](int layer) { scheme_->after_backward(w, layer); };
  w.issue_backward(ctx, timeline_, micro, config_.accumulate, hook);
}

void Trainer::check_loss(double loss, int64_t iteration) {
  if (std::isfinite(loss)) return;
  std::string where =
      net().activations_planned()
          ? "the outputs still on the device are finite (the activation plan reused the others' "
            "memory; with no --device-memory-gb it asks for, and --pack-activations off in 16 "
            "bits, every output is looked at)"
          : "every layer output is finite";
  for (Worker& w : workers_)
    if (auto found = non_finite_output(
            *w.net, num_workers() > 1 ? cat(" on worker ", w.index) : std::string())) {
      where = *found;
      break;
    }
  // The first iteration's forward comes before any update: its NaN is in the data or the weights.
  throw RuntimeCheckError(cat("iteration ", iteration, ": the loss is ", loss, "; ", where,
                              iteration == 1
                                  ? " (before any update: the data or the starting weights hold it)"
                                  : " (try a lower learning rate)"));
}

void Trainer::start_loss_scale(Precision precision) {
  loss_scale_ = LossScale(parse_loss_scale(config_.loss_scale, precision == Precision::kFp16,
                                           config_.loss_scale_growth_interval));
  if (!loss_scale_.active()) return;
  for (Worker& w : workers_) {
    if (w.solver) w.solver->set_skip_non_finite(true);
    w.net->set_loss_scale(loss_scale_.value());
  }
}

std::string Trainer::record_loss_scale(int64_t iteration) {
  if (!loss_scale_.active()) return "";
  // Every worker that updates saw the same summed gradient (ps0: worker 0 alone updates).
  bool skipped = false;
  for (const Worker& w : workers_)
    if (w.solver) {
      skipped = w.solver->last_step_skipped();
      break;
    }
  const double before = loss_scale_.value();
  LossScale::Change change;
  try {
    change = loss_scale_.record(!skipped);
  } catch (const RuntimeCheckError& e) {
    throw RuntimeCheckError(cat("iteration ", iteration, ": ", e.what()));
  }
  if (change != LossScale::Change::kNone)
    for (Worker& w : workers_) w.net->set_loss_scale(loss_scale_.value());
  if (skipped)
    return cat("cgdp: iteration ", iteration, ": the summed gradient is not finite at loss scale ",
               loss_scale_text(before), ": step skipped",
               change == LossScale::Change::kHalved
                   ? cat(", scale now ", loss_scale_text(loss_scale_.value()))
                   : "",
               " (", loss_scale_.skipped_steps(), " skipped so far)");
  if (change == LossScale::Change::kDoubled)
    return cat("cgdp: iteration ", iteration, ": loss scale ", loss_scale_text(before), " -> ",
               loss_scale_text(loss_scale_.value()), " after ", config_.loss_scale_growth_interval,
               " finite steps in a row");
  return "";
}

// BatchNorm's running statistics are sums that each worker updates linearly from its own batches,
// so averaging them over the workers whenever they are read (test, checkpoint) gives what
// averaging after every iteration would, up to float rounding: the average is written back, so a
// run that reads them (a snapshot) differs from one that does not in the last bits (about 1e-7
// relative), and a resume repeats the reads of the run it continues. Across hosts the shards hand
// every host every worker's values unchanged, and each host averages all H·N of them in worker
// order, as one host would. Every host must call this at the same points (it is an exchange); once
// per iteration suffices, as the statistics change only by training.
void Trainer::average_state() {
  if (total_workers() == 1 || state_averaged_at_ == iteration()) return;
  state_averaged_at_ = iteration();
  std::vector<std::vector<std::pair<std::string, Blob<float>*>>> state;
  for (Worker& w : workers_) state.push_back(w.net->state_blobs());
  int64_t per_worker = 0;
  for (const auto& [name, blob] : state[0]) per_worker += blob->count();
  if (per_worker == 0) return;
  std::vector<float> values(static_cast<size_t>(per_worker * num_workers()));
  for (size_t w = 0, at = 0; w < workers_.size(); ++w)
    for (const auto& [name, blob] : state[w]) {
      workers_[w].device->copy(values.data() + at, blob->data(), blob->count() * sizeof(float));
      at += static_cast<size_t>(blob->count());
    }
  if (cluster_) values = cluster_->gather_state(values);  // every worker of every host, in order
  std::vector<double> sum(static_cast<size_t>(per_worker), 0.0);
  for (int g = 0; g < total_workers(); ++g)
    for (int64_t i = 0; i < per_worker; ++i) sum[i] += values[g * per_worker + i];
  std::vector<float> mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / total_workers());
  for (size_t w = 0; w < workers_.size(); ++w) {
    size_t at = 0;
    for (const auto& [name, blob] : state[w]) {
      workers_[w].device->copy(blob->mutable_data(), mean.data() + at, blob->count() * sizeof(float));
      at += static_cast<size_t>(blob->count());
    }
  }
}

// A GPU worker's issuing thread keeps off the aggregator's cores (sync/placement.cpp).
void Trainer::bind_issuing_thread(int worker) {
  workers_[worker].device->bind_calling_thread();
  const CoreSet& cpus = placement_.workers[worker].issue_cpus;
  if (!cpus.empty()) (void)bind_current_thread(cpus);  // unbound: runs anyway
}

int Trainer::loader_threads(const Dataset& data) const {
  return config_.loader_threads > 0 || data.decodes() ? placement_.loader_threads : 1;
}

// The loader's threads decode on the cores near the GPUs, into buffers on their node.
std::function<void()> Trainer::loader_binding() const {
  return [cpus = placement_.loader_cpus] { (void)bind_current_thread(cpus); };  // unbound: runs anyway
}

TrainResult Trainer::run() {
  ProgressReporter progress(out_, config_.metrics_path, config_.plain_output);
  const int64_t batch = per_worker_batch_ * total_workers() * config_.accumulate;
  const double epoch_iters = static_cast<double>(train_data_->size()) / static_cast<double>(batch);
  const int64_t test_every = config_.test_interval != 0 ? config_.test_interval
                                                        : static_cast<int64_t>(std::ceil(epoch_iters));
  const int64_t display = config_.display > 0   ? config_.display
                          : config_.display < 0 ? max_iterations_ + 1  // only the last line
                                                : std::max<int64_t>(1, max_iterations_ / 20);
  announce(progress, batch, epoch_iters);
  const auto start = Clock::now();
  auto window_start = start;
  double window_loss = 0;
  int64_t window_iters = 0;
  const int64_t first_iteration = iteration();
  TrainResult result;
  auto point = [&](int64_t it) {
    ProgressPoint p;
    p.iteration = it;
    p.max_iterations = max_iterations_;
    p.epoch = static_cast<double>(it) / epoch_iters;
    p.elapsed_s = seconds_since(start);
    return p;
  };
  std::deque<double> recent_losses;  // the last average_loss iterations' losses
  if (config_.test_initialization && iteration() == 0) {
    test_point(progress, point(0), result);
    window_start = Clock::now();
  }
  while (iteration() < max_iterations_) {
    if (chunk_tuner_)
      if (const ChunkPlan* plan = chunk_tuner_->plan_to_apply()) set_chunk_plan(*plan);
    const auto iteration_start = Clock::now();
    const double loss = train_iteration();
    if (!loss_scale_line_.empty()) progress.message(loss_scale_line_);
    window_loss += loss;
    recent_losses.push_back(loss);
    if (static_cast<int64_t>(recent_losses.size()) > config_.average_loss) recent_losses.pop_front();
    const double iteration_s = seconds_since(iteration_start);
    ++window_iters;
    const int64_t it = iteration();
    if (it > first_iteration + 1)  // the first iteration warms caches and allocators up
      phases_.add(workers_, scheme_->last_sum_us(), static_cast<int64_t>(iteration_s * 1e6));
    if (chunk_tuner_)
      for (const std::string& line : chunk_tuner_->record(iteration_s * 1e3))
        progress.message(line);
    if (it % display == 0 || it == max_iterations_) {
      ProgressPoint p = point(it);
      p.loss = config_.average_loss > 0
                   ? std::accumulate(recent_losses.begin(), recent_losses.end(), 0.0) /
                         static_cast<double>(recent_losses.size())
                   : window_loss / static_cast<double>(window_iters);
      p.images_per_s = static_cast<double>(window_iters * batch) / seconds_since(window_start);
      progress.train_point(p);
      window_loss = 0;
      window_iters = 0;
      window_start = Clock::now();
    }
    if ((config_.snapshot_every > 0 && it % config_.snapshot_every == 0) ||
        (config_.snapshot_after_train && it == max_iterations_)) {
      if (const std::string path = write_snapshot(); !path.empty())
        progress.message(cat("cgdp: wrote checkpoint ", path));
    }
    if ((test_every > 0 && it % test_every == 0) || it == max_iterations_) {
      const auto test_start = Clock::now();
      test_point(progress, point(it), result);
      window_start += Clock::now() - test_start;  // keep test time out of the training throughput
    }
  }
  if (chunk_tuner_ && !chunk_tuner_->settled())
    for (const std::string& line : chunk_tuner_->outcome()) progress.message(line);
  result.iterations = iteration();
  result.train_seconds = seconds_since(start);
  result.images_per_s = static_cast<double>((result.iterations - first_iteration) * batch) /
                        std::max(result.train_seconds, 1e-9);
  finish(progress, result);
  return result;
}

}  // namespace cgdp
