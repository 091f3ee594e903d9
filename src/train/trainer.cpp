// The single-device training loop: one iteration = accumulate x (load, forward, backward), then
// one SGD step; tests, progress, snapshots around it.
#include "cgdp/train/trainer.hpp"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "cgdp/data/open_dataset.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"

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

}  // namespace

Trainer::Trainer(const TrainConfig& config, FILE* out) : config_(config), out_(out) {
  if (config.threads > 0) {
    omp_set_num_threads(config.threads);
    openblas_set_num_threads(config.threads);
  }
  if (config.accumulate < 1) throw UsageError("--accumulate must be at least 1");
  model_path_ = find_model_file(config.model);
  model_ = load_model(model_path_);
  device_ = &default_cpu_device();
  net_ = std::make_unique<Net<float>>(model_, Phase::Train, *device_, config.batch, config.seed,
                                      model_path_);
  test_batch_ = config.test_batch > 0 ? config.test_batch : 100;
  test_net_ = std::make_unique<Net<float>>(model_, Phase::Test, *device_, test_batch_, config.seed,
                                           model_path_);
  test_net_->share_params_from(*net_);
  const Shape in = net_->input_data().shape();
  if (in.size() != 4)
    throw ModelError(cat(model_path_, ": the Input's data top must be N x C x H x W, got ",
                         shape_string(in)));
  SyntheticSpec synthetic{in[1], in[2], in[3], model_classes(*net_), 60000, config.seed};
  train_data_ = open_dataset(config.data, Split::Train, synthetic);
  test_data_ = open_dataset(config.data, Split::Test, synthetic);
  check_data_fits_model();
  const int64_t per_update = net_->batch_size() * config.accumulate;
  max_iterations_ = config.iterations > 0
                        ? config.iterations
                        : static_cast<int64_t>(std::ceil(config.epochs * static_cast<double>(train_data_->size()) /
                                                         static_cast<double>(per_update)));
  if (max_iterations_ <= 0) throw UsageError("nothing to train: give --iterations or --epochs > 0");
  proto::SolverParameter solver = config.solver;
  if (!solver.has_max_iter()) solver.set_max_iter(static_cast<int32_t>(max_iterations_));  // poly's horizon
  solver_ = std::make_unique<Solver<float>>(*net_, make_lr_policy(solver, "solver settings"),
                                            make_sgd_settings(solver, "solver settings"));
  if (!config.resume_path.empty()) resume(config.resume_path);
  LoaderOptions lo;
  lo.global_batch = net_->batch_size();
  lo.seed = config.seed;
  lo.start = start_position_;
  loader_ = std::make_unique<BatchLoader>(train_data_, lo);
}

void Trainer::check_data_fits_model() {
  const Shape in = net_->input_data().shape();
  const Shape sample = train_data_->sample_shape();
  if (Shape(in.begin() + 1, in.end()) != sample)
    throw ModelError(cat(model_path_, ": the model's input is ", shape_string({in[1], in[2], in[3]}),
                         " per sample but ", train_data_->describe(), " gives ", shape_string(sample)));
  const int classes = model_classes(*net_);
  if (train_data_->num_classes() > classes)
    throw ModelError(cat(model_path_, ": the model predicts ", classes, " classes but ",
                         train_data_->describe(), " has labels up to ", train_data_->num_classes() - 1));
  if (!net_->input_label())
    throw ModelError(cat(model_path_, ": the Input layer needs a second top for the labels"));
}

void Trainer::load_batch(const Batch& batch) {
  Blob<float>& data = net_->input_data();
  std::memcpy(data.mutable_data(), batch.images, data.bytes());
  std::memcpy(net_->input_label()->mutable_data(), batch.labels, net_->input_label()->bytes());
}

double Trainer::train_iteration() {
  net_->zero_param_diffs();
  double loss = 0;
  for (int k = 0; k < config_.accumulate; ++k) {
    const Batch& batch = loader_->next();
    load_batch(batch);
    RunContext ctx{Phase::Train, nullptr, config_.seed, solver_->iteration(), batch.first_sample};
    net_->forward(ctx);
    const double l = net_->loss();
    if (!std::isfinite(l)) {
      const auto layer = net_->first_non_finite_layer();
      throw RuntimeCheckError(cat("iteration ", solver_->iteration(), ": the loss is ", l,
                                  layer ? cat("; first non-finite output in layer '", *layer, "'")
                                        : std::string("; every layer output is finite"),
                                  " (try a lower learning rate)"));
    }
    net_->backward(ctx);
    loss += l;
  }
  solver_->step(1.0 / config_.accumulate);
  return loss / config_.accumulate;
}

Trainer::Evaluation Trainer::evaluate() {
  LoaderOptions lo;
  lo.global_batch = test_batch_;
  lo.order = Order::Sequential;
  lo.epoch_end = EpochEnd::PadLastBatch;
  auto loader = std::make_unique<BatchLoader>(test_data_, lo);
  const int64_t samples = config_.test_samples > 0 ? std::min(config_.test_samples, test_data_->size())
                                                   : test_data_->size();
  double correct = 0, loss = 0;
  int64_t seen = 0;
  while (seen < samples) {
    const Batch& batch = loader->next();
    const int64_t rows = std::min(batch.valid, samples - seen);
    test_net_->set_batch_size(rows);
    std::memcpy(test_net_->input_data().mutable_data(), batch.images, test_net_->input_data().bytes());
    std::memcpy(test_net_->input_label()->mutable_data(), batch.labels, test_net_->input_label()->bytes());
    test_net_->forward({Phase::Test, nullptr, config_.seed, solver_->iteration(), seen});
    correct += accuracy_of(*test_net_) * static_cast<double>(rows);
    loss += test_net_->loss() * static_cast<double>(rows);
    seen += rows;
  }
  test_net_->set_batch_size(test_batch_);
  return {correct / static_cast<double>(seen), loss / static_cast<double>(seen)};
}

TrainResult Trainer::run() {
  ProgressReporter progress(out_, config_.metrics_path, config_.plain_output);
  const int64_t batch = net_->batch_size() * config_.accumulate;
  const double epoch_iters = static_cast<double>(train_data_->size()) / static_cast<double>(batch);
  const int64_t test_every = config_.test_interval != 0 ? config_.test_interval
                                                        : static_cast<int64_t>(std::ceil(epoch_iters));
  const int64_t display = config_.display > 0 ? config_.display : std::max<int64_t>(1, max_iterations_ / 20);
  progress.message(cat("cgdp: training ", net_->name(), " (", model_path_, ", ", net_->learnable_count(),
                       " parameters) on ", train_data_->describe(), ": ", train_data_->size(), " train / ",
                       test_data_->size(), " test samples, batch ", batch, ", ", max_iterations_,
                       " iterations (", cat(static_cast<double>(max_iterations_) / epoch_iters), " epochs), ",
                       device_->name(), ", ", omp_get_max_threads(), " threads"));
  const auto start = Clock::now();
  auto window_start = start;
  double window_loss = 0;
  int64_t window_iters = 0, first_iteration = solver_->iteration();
  TrainResult result;
  auto point = [&](int64_t it) {
    ProgressPoint p;
    p.iteration = it;
    p.max_iterations = max_iterations_;
    p.epoch = static_cast<double>(it) / epoch_iters;
    p.elapsed_s = seconds_since(start);
    return p;
  };
  while (solver_->iteration() < max_iterations_) {
    window_loss += train_iteration();
    ++window_iters;
    const int64_t it = solver_->iteration();
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
      const Evaluation e = evaluate();
      ProgressPoint p = point(it);
      p.accuracy = e.accuracy;
      p.test_loss = e.loss;
      progress.test_point(p);
      result.test_accuracy = e.accuracy;
      result.test_loss = e.loss;
      window_start = Clock::now();  // keep test time out of the training throughput
    }
  }
  result.iterations = solver_->iteration();
  result.train_seconds = seconds_since(start);
  result.images_per_s = static_cast<double>((result.iterations - first_iteration) * batch) /
                        std::max(result.train_seconds, 1e-9);
  if (!config_.save_path.empty()) save_parameters(config_.save_path);
  progress.message(cat("cgdp: done: ", result.iterations, " iterations in ",
                       format_duration(result.train_seconds), ", test accuracy ", result.test_accuracy));
  return result;
}

}  // namespace cgdp
