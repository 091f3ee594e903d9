// The training loop over N workers: one iteration = accumulate x (load, forward, backward) on
// every worker, the sync scheme's exchange and update, then one synchronization; tests,
// progress, snapshots around it.
#include "cgdp/train/trainer.hpp"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cmath>

#include "cgdp/data/open_dataset.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/train/stream_trace.hpp"

namespace cgdp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Classes the model predicts: the channel count of its loss layer's first bottom.
int model_classes(Net<float>& net) {
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).is_loss()) return static_cast<int>(net.bottoms(i)[0]->count(1));
  throw ModelError(cat("model '", net.name(), "' has no loss layer"));
}

double accuracy_of(const Net<float>& net) {
  for (const auto& [name, value] : net.scalar_outputs())
    if (name.find("accuracy") != std::string::npos) return value;
  return NAN;
}

// Per-worker batch from --batch / --global-batch, checked against the device count.
int64_t per_worker_batch(const TrainConfig& c, int64_t model_batch) {
  if (c.devices < 1) throw UsageError(cat("--devices must be at least 1, got ", c.devices));
  if (c.global_batch > 0) {
    if (c.devices > c.global_batch)
      throw UsageError(cat("--devices ", c.devices, " is more than the ", c.global_batch,
                           " samples of the global batch"));
    if (c.global_batch % c.devices != 0)
      throw UsageError(cat("--global-batch ", c.global_batch, " does not split evenly over ",
                           c.devices, " devices"));
    return c.global_batch / c.devices;
  }
  return c.batch > 0 ? c.batch : model_batch;
}

// The first dimension of the model's Input data top (its default batch size).
int64_t declared_batch_size(const proto::NetParameter& model) {
  for (const auto& layer : model.layer())
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

Trainer::Trainer(const TrainConfig& config, FILE* out)
    : config_(config), out_(out), timeline_(!config.timeline_path.empty()) {
  if (config.threads > 0) {
    omp_set_num_threads(config.threads);
    openblas_set_num_threads(config.threads);
  }
  if (config.accumulate < 1) throw UsageError("--accumulate must be at least 1");
  const SyncKind sync = config.sync.empty() ? (config.devices > 1 ? SyncKind::Cgdp : SyncKind::Local)
                                            : parse_sync_kind(config.sync);
  const DeviceKind device_kind = parse_device_kind(config.device_kind);
  if (config.cudnn_workspace_mb < 0) throw UsageError("--cudnn-workspace-mb must be >= 0");
  set_cuda_options({config.tf32, static_cast<size_t>(config.cudnn_workspace_mb) << 20,
                    !config.nondeterministic});
  if (!config.timeline_path.empty()) Timeline::check_writable(config.timeline_path);
  model_path_ = find_model_file(config.model);
  model_ = load_model(model_path_);
  per_worker_batch_ = per_worker_batch(config, declared_batch_size(model_));
  workers_ = make_workers(config.devices, device_kind, model_, per_worker_batch_, config.seed,
                          model_path_, config.accumulate);
  if (config.fail_worker >= 0) inject_fault(config.fail_worker, config.fail_after_copies);
  Net<float>& net0 = net();
  test_batch_ = config.test_batch > 0 ? config.test_batch : 100;
  test_net_ = std::make_unique<Net<float>>(model_, Phase::Test, net0.device(), test_batch_,
                                           config.seed, model_path_);
  test_net_->share_params_from(net0);
  const Shape in = net0.input_data().shape();
  if (in.size() != 4)
    throw ModelError(cat(model_path_, ": the Input's data top must be N x C x H x W, got ", shape_string(in)));
  SyntheticSpec synthetic{in[1], in[2], in[3], model_classes(net0), 60000, config.seed};
  train_data_ = open_dataset(config.data, Split::Train, synthetic);
  test_data_ = open_dataset(config.data, Split::Test, synthetic);
  check_data_fits_model();
  const int64_t per_update = per_worker_batch_ * num_workers() * config.accumulate;
  max_iterations_ = config.iterations > 0
                        ? config.iterations
                        : static_cast<int64_t>(std::ceil(config.epochs * static_cast<double>(train_data_->size()) /
                                                         static_cast<double>(per_update)));
  if (max_iterations_ <= 0) throw UsageError("nothing to train: give --iterations or --epochs > 0");
  make_scheme(sync);
  if (!config.resume_path.empty()) resume(config.resume_path);
  LoaderOptions lo;
  lo.global_batch = per_worker_batch_ * num_workers();
  lo.seed = config_.seed;
  lo.start = start_position_;
  if (config.loader_threads < 1) throw UsageError("--loader-threads must be at least 1");
  lo.threads = config.loader_threads;
  loader_ = std::make_unique<BatchLoader>(train_data_, lo, *workers_[0].device);  // pinned for GPUs
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
}

void Trainer::inject_fault(int worker, int64_t after_copies) {
  if (worker >= num_workers()) throw UsageError(cat("no worker ", worker, " to fail"));
  auto* cpu = dynamic_cast<CpuDevice*>(workers_[worker].device.get());
  if (!cpu) throw UsageError("fault injection needs CPU devices");
  cpu->fail_copies_after(after_copies);
}

void Trainer::make_scheme(SyncKind kind) {
  SyncOptions options;
  if (kind == SyncKind::Cgdp) {
    const auto layers = param_layers(net());
    options.plan = make_chunk_plan(layers, config_.chunk);
    plan_description_ = describe(options.plan, layers);
  }
  options.host_threads = config_.host_threads;
  if (kind == SyncKind::Cgdp) {
    std::vector<DeviceRef> refs;
    for (const Worker& w : workers_) refs.push_back({w.device->kind(), w.device->index()});
    const Placement placement = plan_placement(Topology::discover(), refs, config_.host_threads);
    options.aggregator_cpus = placement.aggregator_cpus();
    placement_summary_ = cat(placement.single_node ? "single NUMA node" : "several NUMA nodes",
                             ", aggregator on cpus ", options.aggregator_cpus.to_string());
  }
  proto::SolverParameter solver = config_.solver;
  if (!solver.has_max_iter()) solver.set_max_iter(static_cast<int32_t>(max_iterations_));  // poly's horizon
  options.lr = make_lr_policy(solver, "solver settings");
  options.sgd = make_sgd_settings(solver, "solver settings");
  scheme_ = make_sync_scheme(kind, workers_, options, timeline_);
}

void Trainer::check_data_fits_model() {
  Net<float>& net0 = net();
  const Shape in = net0.input_data().shape();
  const Shape sample = train_data_->sample_shape();
  if (Shape(in.begin() + 1, in.end()) != sample)
    throw ModelError(cat(model_path_, ": the model's input is ", shape_string({in[1], in[2], in[3]}),
                         " per sample but ", train_data_->describe(), " gives ", shape_string(sample)));
  const int classes = model_classes(net0);
  if (train_data_->num_classes() > classes)
    throw ModelError(cat(model_path_, ": the model predicts ", classes, " classes but ",
                         train_data_->describe(), " has labels up to ", train_data_->num_classes() - 1));
  if (!net0.input_label())
    throw ModelError(cat(model_path_, ": the Input layer needs a second top for the labels"));
}

double Trainer::train_iteration() {
  const int64_t it = iteration();
  for (Worker& w : workers_) {
    mark(*w.compute, timeline_, &w.marks.begin);
    scheme_->begin_iteration(w);
    w.net->zero_param_diffs(*w.compute);
  }
  for (int k = 0; k < config_.accumulate; ++k) {
    const Batch& batch = loader_->next();
    const bool last = k + 1 == config_.accumulate;
    for (Worker& w : workers_) {
      const int64_t row = w.index * per_worker_batch_;
      w.issue_input(batch, row);
      const RunContext ctx{Phase::Train, w.compute.get(), config_.seed, it, batch.first_sample + row};
      w.issue_forward(ctx, timeline_);
      w.issue_loss_readback(k);
      std::function<void(int)> hook;
      if (last) hook = [this, &w](int layer) { scheme_->after_backward(w, layer); };
      w.issue_backward(ctx, timeline_, k, config_.accumulate, hook);
    }
    if (!last)  // the loader reuses the batch's memory on the next call
      for (Worker& w : workers_) w.input_loaded->synchronize();
  }
  scheme_->exchange_and_update(workers_, 1.0 / (num_workers() * config_.accumulate), it);
  synchronize_all(workers_, it);
  double loss = 0;
  for (const Worker& w : workers_)
    for (int k = 0; k < config_.accumulate; ++k) loss += w.loss(k);
  loss /= num_workers() * config_.accumulate;
  check_loss(loss, it);
  return loss;
}

void Trainer::check_loss(double loss, int64_t iteration) {
  if (std::isfinite(loss)) return;
  std::string where = "every layer output is finite";
  for (Worker& w : workers_)
    if (auto layer = w.net->first_non_finite_layer()) {
      where = cat("first non-finite output in layer '", *layer, "'",
                  num_workers() > 1 ? cat(" on worker ", w.index) : std::string());
      break;
    }
  throw RuntimeCheckError(cat("iteration ", iteration, ": the loss is ", loss, "; ", where,
                              " (try a lower learning rate)"));
}

// BatchNorm's running statistics are sums that each worker updates linearly from its own batches,
// so averaging them over the workers whenever they are read (test, checkpoint) gives exactly what
// averaging after every iteration would.
void Trainer::average_state() {
  if (num_workers() == 1) return;
  std::vector<std::vector<std::pair<std::string, Blob<float>*>>> state;
  for (Worker& w : workers_) state.push_back(w.net->state_blobs());
  for (size_t s = 0; s < state[0].size(); ++s) {
    const int64_t n = state[0][s].second->count();
    std::vector<double> mean(n, 0.0);
    std::vector<float> values(n);
    for (size_t w = 0; w < workers_.size(); ++w) {
      workers_[w].device->copy(values.data(), state[w][s].second->data(), n * sizeof(float));
      for (int64_t i = 0; i < n; ++i) mean[i] += values[i];
    }
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(mean[i] / num_workers());
    for (size_t w = 0; w < workers_.size(); ++w)
      workers_[w].device->copy(state[w][s].second->mutable_data(), values.data(), n * sizeof(float));
  }
}

Trainer::Evaluation Trainer::evaluate() {
  average_state();
  Worker& w = workers_[0];
  LoaderOptions lo;
  lo.global_batch = test_batch_;
  lo.order = Order::Sequential;
  lo.epoch_end = EpochEnd::PadLastBatch;
  BatchLoader loader(test_data_, lo, *w.device);
  const int64_t samples = config_.test_samples > 0 ? std::min(config_.test_samples, test_data_->size())
                                                   : test_data_->size();
  double correct = 0, loss = 0;
  int64_t seen = 0;
  while (seen < samples) {
    const Batch& batch = loader.next();
    const int64_t rows = std::min(batch.valid, samples - seen);
    test_net_->set_batch_size(rows);
    Blob<float>& data = test_net_->input_data();
    w.compute->copy_async(data.mutable_data(), batch.images, data.bytes());
    w.compute->copy_async(test_net_->input_label()->mutable_data(), batch.labels, test_net_->input_label()->bytes());
    test_net_->forward({Phase::Test, w.compute.get(), config_.seed, iteration(), seen});
    synchronize_stream(w, *w.compute, "compute", iteration());
    correct += accuracy_of(*test_net_) * static_cast<double>(rows);
    loss += test_net_->loss() * static_cast<double>(rows);
    seen += rows;
  }
  test_net_->set_batch_size(test_batch_);
  return {correct / static_cast<double>(seen), loss / static_cast<double>(seen)};
}

std::string Trainer::memory_report() const {
  std::string out = cat("memory (", to_string(scheme_->kind()), "):");
  for (const Worker& w : workers_) {
    const MemoryStats m = w.device->memory_stats();
    out += cat(" worker ", w.index, " ", m.device_bytes / 1048576.0, " MiB device");
  }
  return out + cat("; host aggregator ", scheme_->host_bytes() / 1048576.0, " MiB pinned");
}

TrainResult Trainer::run() {
  ProgressReporter progress(out_, config_.metrics_path, config_.plain_output);
  const int64_t batch = per_worker_batch_ * num_workers() * config_.accumulate;
  const double epoch_iters = static_cast<double>(train_data_->size()) / static_cast<double>(batch);
  const int64_t test_every = config_.test_interval != 0 ? config_.test_interval
                                                        : static_cast<int64_t>(std::ceil(epoch_iters));
  const int64_t display = config_.display > 0 ? config_.display : std::max<int64_t>(1, max_iterations_ / 20);
  progress.message(cat("cgdp: training ", net().name(), " (", model_path_, ", ", net().learnable_count(),
                       " parameters) on ", train_data_->describe(), ": ", train_data_->size(), " train / ",
                       test_data_->size(), " test samples, batch ", batch, ", ", max_iterations_,
                       " iterations (", static_cast<double>(max_iterations_) / epoch_iters, " epochs), ",
                       omp_get_max_threads(), " threads"));
  for (const std::string& note : device_notes(workers_)) progress.message("cgdp: " + note);
  if (num_workers() > 1)
    progress.message(cat("cgdp: ", num_workers(), " workers (", workers_[0].device->name(), "..",
                         workers_.back().device->name(), "), batch ", per_worker_batch_,
                         " each, sync ", to_string(scheme_->kind()),
                         plan_description_.empty() ? std::string() : ", chunks: " + plan_description_));
  if (!placement_summary_.empty()) progress.message(cat("cgdp: placement: ", placement_summary_));
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
  while (iteration() < max_iterations_) {
    const auto iteration_start = Clock::now();
    window_loss += train_iteration();
    ++window_iters;
    const int64_t it = iteration();
    if (it > first_iteration + 1)  // the first iteration warms caches and allocators up
      phases_.add(workers_, scheme_->last_sum_us(),
                  static_cast<int64_t>(seconds_since(iteration_start) * 1e6));
    if (it % display == 0 || it == max_iterations_) {
      ProgressPoint p = point(it);
      p.loss = window_loss / static_cast<double>(window_iters);
      p.images_per_s = static_cast<double>(window_iters * batch) / seconds_since(window_start);
      progress.train_point(p);
      window_loss = 0;
      window_iters = 0;
      window_start = Clock::now();
    }
    if (config_.snapshot_every > 0 && it % config_.snapshot_every == 0)
      progress.message(cat("cgdp: wrote checkpoint ", write_snapshot()));
    if ((test_every > 0 && it % test_every == 0) || it == max_iterations_) {
      const auto test_start = Clock::now();
      const Evaluation e = evaluate();
      ProgressPoint p = point(it);
      p.accuracy = e.accuracy;
      p.test_loss = e.loss;
      progress.test_point(p);
      result.test_accuracy = e.accuracy;
      result.test_loss = e.loss;
      window_start += Clock::now() - test_start;  // keep test time out of the training throughput
    }
  }
  result.iterations = iteration();
  result.train_seconds = seconds_since(start);
  result.images_per_s = static_cast<double>((result.iterations - first_iteration) * batch) /
                        std::max(result.train_seconds, 1e-9);
  if (!config_.save_path.empty()) {
    save_parameters(config_.save_path);
    progress.message(cat("cgdp: wrote parameters to ", config_.save_path));
  }
  if (!config_.timeline_path.empty()) {
    timeline_.write(config_.timeline_path);
    progress.message(cat("cgdp: wrote timeline ", config_.timeline_path, " (open it in Perfetto)"));
  }
  if (config_.phase_table || num_workers() > 1)
    progress.message(phases_.format(cat("phases (", to_string(scheme_->kind()), ", ", num_workers(), " workers)")));
  if (config_.phase_table || num_workers() > 1) progress.message(memory_report());
  if (const std::string note = scheme_->placement_note(); !note.empty()) progress.message(cat("cgdp: ", note));
  progress.message(cat("cgdp: done: ", result.iterations, " iterations in ",
                       format_duration(result.train_seconds), ", test accuracy ", result.test_accuracy));
  return result;
}

}  // namespace cgdp
