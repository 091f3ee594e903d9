// The up-front memory check: measure one worker's nets on a MeasuringDevice, scale to the run,
// and compare with free memory before the first real allocation.
#include "cgdp/train/memory_estimate.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/deconvolution_layer.hpp"
#include "cgdp/layers/weight_slices.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/host_history.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/factor_buffers.hpp"
#include "per_channel_scratch.cuh"
#include "sum_squares_scratch.cuh"

namespace cgdp {

namespace {

int64_t unique_top_bytes(const Net<float>& net) {
  std::set<const Blob<float>*> tops;
  for (int i = 0; i < net.num_layers(); ++i)
    for (const Blob<float>* top : net.tops(i)) tops.insert(top);
  int64_t bytes = 0;
  for (const Blob<float>* top :
       tops) {  // its values unless shared or planned, its gradient unless planned
    if (!top->data_is_aliased() && !top->data_is_planned())
      bytes += static_cast<int64_t>(top->bytes());
    if (top->has_diff() && !top->diff_is_planned()) bytes += static_cast<int64_t>(top->bytes());
  }
  return bytes + net.activation_gradient_bytes() + net.activation_plan().arena_bytes;
}

// Children of worker w in ps0's reduction tree: at strides 1, 2, 4, ... w is a parent when it is
// a multiple of twice the stride and w + stride is a worker (ps0_sync.cpp's reduction_edges).
int ps0_children(int w, int workers) {
  int children = 0;
  for (int stride = 1; stride < workers; stride *= 2)
    if (w % (2 * stride) == 0 && w + stride < workers) ++children;
  return children;
}

// /proc/meminfo's MemAvailable, in bytes; -1 when it cannot be read.
int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

// The cgroup v2 memory limit less what the group already uses; -1 when there is none.
int64_t cgroup_room() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  int64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return -1;
  try {
    return std::max<int64_t>(std::stoll(max_text) - current, 0);
  } catch (const std::exception&) {
    return -1;
  }
}

// What a net's CUDA layers allocate at their first pass (Layer::cuda_buffer_bytes): the
// estimate's net, built on an accounting device, never ran them.
int64_t cuda_layer_bytes(const Net<float>& net) {
  int64_t bytes = 0;
  if (net.device().kind() != DeviceKind::Cuda) return bytes;
  for (int i = 0; i < net.num_layers(); ++i)
    bytes += net.layer(i).cuda_buffer_bytes(net.phase() == Phase::Train && net.needs_backward(i));
  return bytes;
}

// The cuDNN passes a net's convolutions run, keyed as their stored choices are: forward only in a
// test net, and in a train net each backward the net runs.
void add_cudnn_passes(const Net<float>& net, std::vector<ConvPassProblem>& passes) {
  for (int i = 0; i < net.num_layers(); ++i) {
    const auto* c = dynamic_cast<const ConvolutionLayer<float>*>(&net.layer(i));
    const auto* d = dynamic_cast<const DeconvolutionLayer<float>*>(&net.layer(i));
    if (!c && !d) continue;
    const Shape& in = net.bottoms(i)[0]->shape();
    const Shape& out = net.tops(i)[0]->shape();
    const bool backward = net.phase() == Phase::Train && net.needs_backward(i);
    const bool input_gradient = backward && net.propagate_down(i)[0];
    const std::vector<ConvPassProblem> more =
        c ? c->cudnn_passes(in, out, backward, input_gradient)
          : d->cudnn_passes(in, out, backward, input_gradient);
    passes.insert(passes.end(), more.begin(), more.end());
  }
}

// The largest 16-bit operand copies one Convolution, Deconvolution or InnerProduct call of the
// net takes (cuda/half_operands.hpp); 0 without such a layer. InnerProduct's forward narrows no
// output; its backward narrows the output's gradient too (a TEST net runs none).
int64_t largest_half_operands(const Net<float>& net) {
  int64_t most = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    const std::string type = net.layer(i).type();
    if (type != "Convolution" && type != "Deconvolution" && type != "InnerProduct") continue;
    const bool backward = net.phase() == Phase::Train && net.needs_backward(i);
    const bool narrows_output = type != "InnerProduct" || backward;
    most = std::max(most, half_operand_bytes(net.bottoms(i)[0]->count(),
                                             narrows_output ? net.tops(i)[0]->count() : 0,
                                             net.layer(i).params()[0]->count()));
  }
  return most;
}

struct Part {
  const char* name;
  int64_t bytes;
  const char* shrink;  // what makes it smaller
};

// The most CUDA's per-channel sums of the net's BatchNorm, Scale and Bias layers can take.
int64_t per_channel_scratch(const Net<float>& net) {
  int64_t most = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    const std::string type = net.layer(i).type();
    int64_t channels = 0;
    if (type == "BatchNorm") {
      const Shape& shape = net.bottoms(i)[0]->shape();
      channels = shape.size() > 1 ? shape[1] : 1;
    } else if (type == "Scale" || type == "Bias") {  // the scale (or bias): a layer's or a bottom's
      channels = net.layer(i).params().empty() ? net.bottoms(i).back()->count()
                                               : net.layer(i).params()[0]->count();
    } else {
      continue;
    }
    most = std::max(most, kernels::per_channel_scratch_bound(channels));
  }
  return most;
}

}  // namespace

MemoryEstimate estimate_memory(const proto::NetParameter& model, const std::string& source,
                               int64_t batch, int64_t test_batch, int workers, SyncKind sync,
                               int histories, const proto::NetParameter* test_model,
                               const std::string& test_source,
                               const ActivationMemoryPlan& activations, DeviceKind kind) {
  MemoryEstimate m;
  m.workers = workers;
  m.batch = batch;
  m.test_batch = test_batch;
  MeasuringDevice train_device(kind), test_device(kind);
  Net<float> net(model, Phase::Train, train_device, batch, /*seed=*/1, source, activations.memory,
                 nullptr, activations.streamed_weights);
  m.planned = activations.memory == ActivationMemory::Planned;
  if (m.planned) {
    net.plan_activations(activations.arena_limit, nullptr, activations.pack,
                         activations.write_over);
    const ActivationPlan& plan = net.activation_plan();
    m.arena = plan.arena_bytes;
    m.offload_host = plan.host_bytes;
    m.offload_each_way = plan.bytes_each_way();
    m.offloaded = plan.offloaded_count();
    m.packed = plan.packed_count();
    m.packed_bytes = plan.packed_bytes();
    m.rounded_bytes = plan.rounded_bytes();
    m.read_packed =
        static_cast<int>(std::count_if(plan.activations.begin(), plan.activations.end(),
                                       [](const PlannedActivation& a) { return a.only_packed(); }));
    m.written_over = static_cast<int>(
        std::count_if(plan.activations.begin(), plan.activations.end(),
                      [](const PlannedActivation& a) { return a.written_over >= 0; }));
    m.planned_units = static_cast<int>(plan.activations.size());
    m.arena_peak = arena_peak(plan);
    std::vector<int> copy_of(plan.activations.size(), -1);
    for (size_t i = 0; i < plan.activations.size(); ++i)
      if (const PlannedActivation& a = plan.activations[i]; a.offloaded) {
        copy_of[i] = static_cast<int>(m.offload_copies.size());
        m.offload_copies.push_back({a.last_forward,
                                    plan.fetch_step(a),
                                    a.first_backward,
                                    ActivationPlan::moved_bytes(a),
                                    {},
                                    {}});
      }
    for (size_t i = 0; i < plan.activations.size(); ++i)
      if (copy_of[i] >= 0) {
        const CopyOutWaiters waiters = copy_out_waiters(plan, plan.activations[i]);
        OffloadCopy& copy = m.offload_copies[copy_of[i]];
        copy.steps_after_out = waiters.write_steps;
        for (int b : waiters.fetched) copy.fetches_after_out.push_back(copy_of[b]);
      }
  }
  for (int i = 0; i < net.num_layers(); ++i) m.layer_names.push_back(net.layer(i).name());
  m.sync = sync;
  m.learnable = net.learnable_count();
  const int64_t flat = m.learnable * static_cast<int64_t>(sizeof(float));
  m.parameters = m.gradients = net.device_learnable_count() * static_cast<int64_t>(sizeof(float));
  m.streamed = flat - m.parameters;
  m.streamed_layers = activations.streamed_weights;
  m.history = flat * histories;  // SGD's momentum; Adam's two moments
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).can_stream_weight() && !net.param_shared(i, 0))
      m.streamable.emplace_back(net.layer(i).name(), net.layer(i).params()[0]->bytes());
  std::stable_sort(m.streamable.begin(), m.streamable.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  m.activations = unique_top_bytes(net);
  m.params = param_layers(net);
  m.per_channel_scratch = per_channel_scratch(net);
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).type() == "Convolution" || net.layer(i).type() == "Deconvolution")
      m.largest_convolution_weights = std::max<int64_t>(
          m.largest_convolution_weights, static_cast<int64_t>(net.layer(i).params()[0]->bytes()));
  m.largest_half_operands = largest_half_operands(net);
  m.scratch = std::max<int64_t>(
      train_device.memory_stats().device_bytes - m.parameters - m.gradients - m.activations, 0);
  m.train_peak = train_device.memory_stats().device_peak_bytes;
  // As the trainer builds it: forward only, its activations planned by liveness in the train net's
  // idle memory, which grows by what it lacks (counted as the test net's: worker 0 alone lends).
  const int64_t lender_before = train_device.memory_stats().device_bytes;
  const auto test = make_test_net(test_model ? *test_model : model, net, test_device, test_batch,
                                  /*seed=*/1, test_model ? test_source : source);
  const int64_t lent = train_device.memory_stats().device_bytes - lender_before;
  m.test_net = test_device.memory_stats().device_bytes + lent;
  m.scratch += cuda_layer_bytes(net);
  m.test_net += cuda_layer_bytes(*test);
  add_cudnn_passes(net, m.cudnn_passes);
  add_cudnn_passes(*test, m.cudnn_passes);
  m.largest_test_half_operands = largest_half_operands(*test);
  m.test_peak = test_device.memory_stats().device_peak_bytes + lent;
  if (sync == SyncKind::Cgdp) m.pinned = (workers + 1) * m.gradients;  // receive per worker + sum
  m.pinned += workers * (m.offload_host + 2 * m.streamed);
  return m;
}

void add_cuda_scratch(MemoryEstimate& m, DeviceKind kind, int64_t cudnn_workspace_mb,
                      Precision precision, const ConvAlgorithmTable* choices,
                      const std::string& gpu) {
  if (kind != DeviceKind::Cuda) return;
  const std::optional<int64_t> stored =
      choices ? choices->stored_scratch(m.cudnn_passes, gpu) : std::nullopt;
  m.cudnn_scratch_stored = m.largest_convolution_weights > 0 && stored.has_value();
  if (m.cudnn_scratch_stored)
    m.cudnn_scratch = *stored;  // no search runs: the scratch is what the chosen algorithms use
  else if (m.largest_convolution_weights > 0)
    m.cudnn_scratch = (cudnn_workspace_mb << 20) + m.largest_convolution_weights;
  m.cudnn_scratch = std::max(m.cudnn_scratch, m.per_channel_scratch);  // the same buffer
  m.solver_scratch = kernels::kSumSquaresBytes;
  m.half_operands = m.test_half_operands = 0;
  if (!is_16_bit(precision)) return;
  m.half_operands = m.largest_half_operands;
  // The test net runs on worker 0's compute stream: its copies, at its own batch, share the
  // scratch.
  m.test_half_operands = std::max<int64_t>(m.largest_test_half_operands - m.half_operands, 0);
}

void add_exchange_buffers(MemoryEstimate& m, SyncKind sync, ExchangeDtype dtype) {
  if (sync != SyncKind::Cgdp || dtype == ExchangeDtype::Fp32) return;
  const int64_t elements = m.parameters / static_cast<int64_t>(sizeof(float));  // the device part
  m.exchange_narrow =
      narrow_exchange_bytes(elements, static_cast<int64_t>(m.params.size())).total();
}

void add_factor_buffers(MemoryEstimate& m, SyncKind sync, const std::vector<bool>& factored,
                        int micro_batches, int64_t all_workers, ExchangeDtype dtype) {
  m.exchange_factors = 0;
  if (sync != SyncKind::Cgdp) return;
  CGDP_ASSERT(factored.size() == m.params.size());
  std::vector<bool> sent(factored.size());
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = factored[i] && m.params[i].factorable();
  m.exchange_factors =
      factor_buffer_bytes(m.params, sent, m.batch * micro_batches, all_workers, dtype).total();
}

int64_t MemoryEstimate::receive_bytes(int w) const {
  return sync == SyncKind::Ps0 ? ps0_children(w, workers) * gradients : 0;
}

int64_t MemoryEstimate::worker_bytes(int w) const {
  const bool updates = sync != SyncKind::Ps0 || w == 0;  // ps0: worker 0 updates, then broadcasts
  return replica() + (updates ? history + solver_scratch : 0) +
         (w == 0 ? test_net + test_half_operands : 0) + receive_bytes(w) + cudnn_scratch +
         half_operands + exchange_narrow + exchange_factors;
}

int64_t MemoryEstimate::worker_peak(int w) const {
  const int64_t building_test =
      w == 0 ? replica() + test_peak : 0;  // the trainer builds it after the workers
  return std::max({train_peak, building_test, worker_bytes(w)});
}

int64_t MemoryEstimate::device_total() const {
  int64_t total = 0;
  for (int w = 0; w < workers; ++w) total += worker_bytes(w);
  return total;
}

int64_t MemoryEstimate::fullest_gpu(int gpus) const {
  std::vector<int64_t> per_gpu(std::max(gpus, 1), 0);
  for (int w = 0; w < workers; ++w) per_gpu[w % per_gpu.size()] += worker_bytes(w);
  return *std::max_element(per_gpu.begin(), per_gpu.end());
}

int MemoryEstimate::workers_on_fullest_gpu(int gpus) const {
  return (workers + std::max(gpus, 1) - 1) / std::max(gpus, 1);  // the first GPU holds worker 0
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

int64_t free_memory_bytes(DeviceKind kind) {
  if (kind == DeviceKind::Cuda) return cuda_free_memory();
  const int64_t available = mem_available(), room = cgroup_room();
  if (available < 0) return room;
  return room < 0 ? available : std::min(available, room);
}

int64_t needed_bytes(const MemoryEstimate& m, DeviceKind kind, int gpus, BudgetScope scope) {
  // Worker 0 holds the most: the test net besides its replica. Its moment of building comes on top
  // of what the other workers on the device (or in RAM) keep.
  const int64_t building = m.worker_peak(0) - m.worker_bytes(0);
  if (kind == DeviceKind::Cuda) return m.fullest_gpu(gpus) + building;
  return scope == BudgetScope::Device ? m.worker_peak(0) : m.device_total() + m.pinned + building;
}

bool packs_from_the_start(const std::string& mode, DeviceKind kind) {
  return packing_of(mode, kind) != Packing::None && (mode != "auto" || kind == DeviceKind::Cuda);
}

Packing packing_of(const std::string& mode, DeviceKind kind) {
  if (mode == "off") return Packing::None;
  if (mode == "exact") return Packing::Exact;
  if (mode == "on") return Packing::Rounding;
  // A CPU run packs only to fit its budget: with the same bits as one that fits.
  if (mode == "auto") return kind == DeviceKind::Cuda ? Packing::Rounding : Packing::Exact;
  throw UsageError(cat("--pack-activations must be auto, on, exact or off, not '", mode, "'"));
}

ActivationMemoryPlan default_activation_memory(Precision precision, const std::string& pack_mode,
                                               DeviceKind kind) {
  ActivationMemoryPlan plan;
  plan.pack = packing_of(pack_mode, kind);
  plan.memory = is_16_bit(precision) && packs_from_the_start(pack_mode, kind)
                    ? ActivationMemory::Planned
                    : ActivationMemory::Owned;
  return plan;
}

FittedMemory fit_activations(
    const std::function<MemoryEstimate(const ActivationMemoryPlan&)>& estimate, DeviceKind kind,
    int gpus, int64_t budget, BudgetScope scope) {
  FittedMemory fit;
  fit.activations.memory = ActivationMemory::Planned;
  fit.estimate = estimate(fit.activations);  // liveness alone
  const MemoryEstimate& m = fit.estimate;
  if (needed_bytes(m, kind, gpus, scope) <= budget) return fit;
  // Each worker that shares the budget gets an equal part of what the rest leaves.
  const int sharing = kind == DeviceKind::Cuda       ? m.workers_on_fullest_gpu(gpus)
                      : scope == BudgetScope::Device ? 1
                                                     : m.workers;
  const int64_t rest = needed_bytes(m, kind, gpus, scope) - sharing * m.arena;
  fit.activations.arena_limit = std::max<int64_t>((budget - rest) / sharing, 0);
  // The moments of building do not shrink with the arena: lower the limit by what is left over.
  for (int attempt = 0; attempt < 4; ++attempt) {
    fit.estimate = estimate(fit.activations);
    const int64_t over = needed_bytes(fit.estimate, kind, gpus, scope) - budget;
    if (over <= 0 || fit.activations.arena_limit == 0) break;
    fit.activations.arena_limit =
        std::max<int64_t>(fit.activations.arena_limit - (over + sharing - 1) / sharing, 0);
  }
  return fit;
}

void put_history_on_host(MemoryEstimate& m) {
  if (m.history_on_host() || m.history == 0 || m.learnable == 0) return;
  const auto histories =
      static_cast<int>(m.history / (m.learnable * static_cast<int64_t>(sizeof(float))));
  m.history_host = m.history;
  m.history = history_stage_bytes(m.learnable, histories, sizeof(float), m.streamed > 0);
  m.pinned += m.updating_workers() * m.history_host;
}

namespace {

// fit_offload's last resort: the history on the host, and InnerProduct weights streamed from
// there too, largest first, until the run fits (or none is left: `best` so far then). A CPU run
// only, for now (InnerProductLayer::stream_weight).
FittedMemory stream_weights(
    const std::function<MemoryEstimate(const ActivationMemoryPlan&)>& estimate, DeviceKind kind,
    int gpus, int64_t budget, BudgetScope scope, FittedMemory best) {
  if (kind != DeviceKind::Cpu) return best;
  std::vector<std::string> streamed;
  const auto streamable = best.estimate.streamable;  // a copy: `best` is replaced in the loop
  for (const auto& [layer, bytes] : streamable) {
    streamed.push_back(layer);
    FittedMemory fit = fit_activations(
        [&](const ActivationMemoryPlan& activations) {
          ActivationMemoryPlan with = activations;
          with.streamed_weights = streamed;
          MemoryEstimate m = estimate(with);
          put_history_on_host(m);
          return m;
        },
        kind, gpus, budget, scope);
    fit.activations.streamed_weights = streamed;
    const int64_t need = needed_bytes(fit.estimate, kind, gpus, scope);
    const bool fits = need <= budget;
    if (fits || need < needed_bytes(best.estimate, kind, gpus, scope)) best = std::move(fit);
    if (fits) break;
  }
  return best;
}

}  // namespace

FittedMemory fit_offload(const std::function<MemoryEstimate(const ActivationMemoryPlan&)>& estimate,
                         DeviceKind kind, int gpus, int64_t budget, BudgetScope scope,
                         const Profile* profile) {
  FittedMemory fit = fit_activations(estimate, kind, gpus, budget, scope);
  const int64_t need = needed_bytes(fit.estimate, kind, gpus, scope);
  const bool fits = need <= budget;
  if ((fits && (!profile || fit.estimate.offloaded == 0)) ||
      (kind != DeviceKind::Cuda && scope != BudgetScope::Device))
    return fit;
  FittedMemory moved = fit_activations(
      [&](const ActivationMemoryPlan& activations) {
        MemoryEstimate m = estimate(activations);
        put_history_on_host(m);
        return m;
      },
      kind, gpus, budget, scope);
  const int64_t moved_need = needed_bytes(moved.estimate, kind, gpus, scope);
  if (!fits && moved_need > budget)
    return stream_weights(estimate, kind, gpus, budget, scope, moved_need < need ? moved : fit);
  if (!fits) return moved_need < need ? moved : fit;
  if (moved_need > budget) return fit;
  const double kept = predict_offload(fit.estimate, *profile).slowdown();
  return predict_offload(moved.estimate, *profile).slowdown() < kept ? moved : fit;
}

OffloadPassCost predict_offload(const MemoryEstimate& m, const Profile& profile) {
  std::map<std::string, const LayerCost*> by_name;
  for (const LayerCost& l : profile.layers) by_name[l.name] = &l;
  const int layers = static_cast<int>(m.layer_names.size());
  std::vector<double> step_us(2 * static_cast<size_t>(layers), 0.0);
  for (int i = 0; i < layers; ++i)
    if (const auto it = by_name.find(m.layer_names[i]); it != by_name.end()) {
      step_us[i] = it->second->forward_us;
      step_us[2 * layers - 1 - i] = it->second->backward_us;
    }
  OffloadPassCost cost =
      predict_offload_pass(step_us, m.offload_copies, profile.d2h, profile.h2d,
                           cpu_copy_share(profile.contention_factor, profile.shared_cores));
  if (m.history_on_host())  // the stage holds two pieces
    cost.history_us = history_staging_us(m.history_host, m.history / 2, profile.h2d, profile.d2h);
  // bf16 kernels: the stage narrows the forward's slices and the input gradient's again
  // (layers/onednn_inner_product.cpp). Rounded operands round the stage instead of a whole copy.
  const bool narrows = profile.precision == "bf16" && cpu_has_bf16();
  cost.streamed_us = streamed_weights_us(m.streamed, profile.h2d, profile.d2h, narrows ? 1 : 0);
  return cost;
}

std::string describe_offload(const MemoryEstimate& m) {
  std::string text =
      cat("activations planned by liveness in a ", format_bytes(m.arena), " arena per worker");
  if (m.packed > 0)
    text += cat(
        "; ", m.packed, " of ", m.planned_units, " wait in 16 bits between forward and backward (",
        format_bytes(m.packed_bytes), " of values in half of that",
        m.read_packed > 0 ? cat("; ", m.read_packed,
                                " of them read in 16 bits by every reader, never widened back")
                          : std::string(),
        m.written_over > 0
            ? cat("; ", m.written_over, " of those written over by the layer after them")
            : std::string(),
        m.rounded_bytes > 0
            ? cat("; ", format_bytes(m.rounded_bytes),
                  " of them are read rounded, as under PyTorch's AMP; --pack-activations exact "
                  "keeps every bit")
            : std::string(),
        ")");
  if (m.offloaded > 0 || m.packed == 0)
    text += cat("; ", m.offloaded, " of ", m.planned_units,
                " wait in pinned host memory between forward and backward (",
                format_bytes(m.offload_each_way), " out and back per micro-batch)");
  if (m.streamed > 0) {
    std::string layers;
    for (const std::string& name : m.streamed_layers)
      layers += cat(layers.empty() ? "" : ", ", name);
    const bool one = m.streamed_layers.size() == 1;
    text += cat("; ", one ? "the weight of " : "the weights of ", layers, " (",
                format_bytes(m.streamed), one ? ") waits" : ") wait", " in pinned host memory and ",
                one ? "passes" : "pass", " through the device in slices at every pass, with ",
                one ? "its gradient" : "their gradients");
  }
  if (m.history_on_host())
    text += cat("; the solver's history (", format_bytes(m.history_host),
                " per updating worker) waits in pinned host memory between steps, staged through ",
                format_bytes(m.history), " of the device (in and out at every step)");
  return text;
}

std::pair<std::string, const char*> step_of(const MemoryEstimate& m, int step) {
  const int layers = static_cast<int>(m.layer_names.size());
  if (step < layers) return {m.layer_names[step], "forward"};
  return {m.layer_names[2 * layers - 1 - step], "backward"};
}

std::string describe_arena_peak(const MemoryEstimate& m, size_t holders_shown) {
  if (!m.planned || m.layer_names.empty()) return {};
  const ArenaPeak& peak = m.arena_peak;
  const auto [layer, pass] = step_of(m, peak.step);
  std::string text =
      cat("the arena is fullest at ", layer, "'s ", pass, " (", format_bytes(peak.bytes), "): ");
  int64_t rest = 0;
  for (size_t k = 0; k < peak.holders.size(); ++k) {
    if (k < holders_shown)
      text +=
          cat(k > 0 ? ", " : "", peak.holders[k].name, " ", format_bytes(peak.holders[k].bytes));
    else
      rest += peak.holders[k].bytes;
  }
  if (peak.holders.size() > holders_shown)
    text += cat(", and ", peak.holders.size() - holders_shown, " more (", format_bytes(rest), ")");
  return text;
}

void check_memory_fits(const MemoryEstimate& m, DeviceKind kind, int gpus, int64_t budget,
                       const std::string& budget_is, BudgetScope scope) {
  if (budget < 0) return;  // nothing known to check against
  const bool cuda = kind == DeviceKind::Cuda;
  const int64_t need = needed_bytes(m, kind, gpus, scope);
  if (need <= budget) return;
  // The parts, over the workers of the fullest GPU (CUDA: its first, which holds worker 0), of
  // worker 0 (a CPU device) or all.
  const bool one_device = !cuda && scope == BudgetScope::Device;
  const int step = cuda ? std::max(gpus, 1) : one_device ? m.workers : 1;
  int n = 0, updating = 0;
  int64_t receive = 0;
  for (int w = 0; w < m.workers; w += step) {
    ++n;
    updating += m.sync != SyncKind::Ps0 || w == 0;
    receive += m.receive_bytes(w);
  }
  const char* fewer = n > 1 ? "fewer --devices" : "a smaller model";  // one replica is too big
  std::vector<Part> parts = {
      {"activations", m.activations * n, "lower --batch"},
      {"layer scratch", m.scratch * n, "lower --batch"},
      {"parameters", m.parameters * n, fewer},
      {"gradients", m.gradients * n, fewer},
      {"momentum", m.history * updating, fewer},
      {"the solver's scratch", m.solver_scratch * updating, fewer},
      {"accumulation sums", m.fold * n, "a lower --accumulate"},
      {"cuDNN scratch", m.cudnn_scratch * n, "a lower --cudnn-workspace-mb"},
      {"16-bit operand copies", m.half_operands * n, "lower --batch"},
      {"16-bit exchange buffers", m.exchange_narrow * n, "--exchange-dtype fp32"},
      {"sufficient factors", m.exchange_factors * n, "--fc-exchange dense"},
      {"test net", m.test_net + m.test_half_operands, "lower --test-batch"},
      {"ps0 receive buffers", receive, "--sync cgdp"},
      {"host sums", cuda || one_device ? 0 : m.pinned, "fewer --devices"},
  };
  std::stable_sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.bytes > b.bytes; });
  std::string largest, flags;
  std::set<std::string> named;
  for (size_t i = 0; i < 3 && parts[i].bytes > 0; ++i) {
    largest += cat(i ? ", " : "", parts[i].name, " ", format_bytes(parts[i].bytes));
    if (named.insert(parts[i].shrink).second) flags += cat(flags.empty() ? "" : ", ", parts[i].shrink);
  }
  const std::string where =
      cuda         ? cat("the first GPU (", n, " worker", n > 1 ? "s" : "", ")")
      : one_device ? std::string("worker 0's device (cpu:0)")
                   : cat(m.workers, " worker", m.workers > 1 ? "s" : "", " on the CPU");
  std::string offloaded;
  if (m.planned) {  // "with A, B and C offloaded to the host"
    std::vector<std::string> moved{cat(m.offloaded, " of ", m.planned_units, " activations")};
    if (m.history_on_host()) moved.emplace_back("the solver's history");
    if (const size_t k = m.streamed_layers.size(); m.streamed > 0)
      moved.push_back(cat(k, k == 1 ? " weight" : " weights"));
    offloaded = ", with " + moved[0];
    for (size_t i = 1; i < moved.size(); ++i)
      offloaded += cat(i + 1 == moved.size() ? " and " : ", ", moved[i]);
    offloaded += " offloaded to the host";
  }
  throw UsageError(cat("this run needs ", format_bytes(need), " on ", where, offloaded, " but ",
                       budget_is, " is ", format_bytes(budget), ": ", largest, " (batch ", m.batch,
                       ", test batch ", m.test_batch, "); to fit: ", flags));
}

}  // namespace cgdp
