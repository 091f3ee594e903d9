// The profiler: training iterations of the trainer's own workers give the per-layer, update and
// sync figures (from the timeline's stream-order spans); on the CPU backend as many again with
// per-layer chunks give the contention factor; then copies, host sums and device sums are timed
// on the same workers, all N of them at once; on image data, the loader alone at the end.
#include "cgdp/measure/profiler.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string_view>
#include <thread>
#include <tuple>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/cost/fits.hpp"
#include "cgdp/data/loader_rate.hpp"
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/sufficient_factors.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/device_sum.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {

namespace {

using Clock = std::chrono::steady_clock;

double now_us() {
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}

// Like mark() (stream_trace.hpp) but at sub-microsecond resolution: a 4 KiB copy takes about one.
void stamp(Stream& stream, double* slot) {
  stream.launch_host_func([slot] { *slot = now_us(); });
}

void check_options(const ProfileOptions& o) {
  if (o.warmup < 0) throw UsageError(cat("--warmup must be at least 0, got ", o.warmup));
  if (o.iterations < 1)
    throw UsageError(cat("--iterations must be at least 1, got ", o.iterations));
  if (o.repeats < 1) throw UsageError(cat("--repeats must be at least 1, got ", o.repeats));
  if (o.min_copy_bytes < 4 || o.max_copy_bytes < 4 * o.min_copy_bytes)
    throw UsageError(cat("copy sizes: need 4 <= min (", o.min_copy_bytes, ") and max (",
                         o.max_copy_bytes, ") >= 4 x min, for two sizes or more"));
  if (o.max_sum_bytes < 4)
    throw UsageError(cat("sum size cap must be at least 4 bytes, got ", o.max_sum_bytes));
}

// The run the layer, update and sync figures come from: cgdp with one chunk, so the exchange
// never overlaps a layer's compute, and the timeline kept in memory.
TrainConfig profiling_config(const TrainConfig& config, const ProfileOptions& o) {
  TrainConfig c = config;
  c.sync = "cgdp";
  c.chunk = "all";
  c.accumulate = 1;
  c.iterations = o.warmup + o.iterations;
  c.record_timeline = true;
  c.timeline_path.clear();
  c.metrics_path.clear();
  c.save_path.clear();
  c.resume_path.clear();
  c.snapshot_every = 0;
  c.fail_worker = -1;
  c.hosts.clear();  // one host: the profile describes this machine
  c.chunk_piece_kb = 0;  // whole chunks: the model cuts them into pieces itself
  return c;
}

// Spans on the timeline by (pid, category, name), in the order they ran: the k-th of a worker's
// spans of one layer is iteration k's.
class Spans {
 public:
  Spans(std::vector<TraceEvent> events, int warmup, int iterations)
      : events_(std::move(events)), warmup_(warmup), iterations_(iterations) {
    for (const TraceEvent& e : events_) by_key_[{e.pid, e.category, e.name}].push_back(&e);
  }
  // The measured iterations' spans of one key; empty if it never ran (a layer without backward).
  std::vector<const TraceEvent*> measured(int pid, const std::string& category,
                                          const std::string& name) const {
    auto it = by_key_.find({pid, category, name});
    if (it == by_key_.end()) return {};
    const auto& all = it->second;
    if (all.size() != static_cast<size_t>(warmup_ + iterations_))
      throw RuntimeCheckError(cat("profile: '", name, "' (", category, ") ran ", all.size(),
                                  " times in ", warmup_ + iterations_,
                                  " iterations; layer names must be unique"));
    return {all.begin() + warmup_, all.end()};
  }
  // Durations of the measured iterations' spans of one key; zeros if it never ran.
  std::vector<double> durations(int pid, const std::string& category,
                                const std::string& name) const {
    std::vector<double> us(iterations_, 0.0);
    const auto spans = measured(pid, category, name);
    for (size_t k = 0; k < spans.size(); ++k) us[k] = static_cast<double>(spans[k]->duration_us());
    return us;
  }
  // The last iterations() spans of one key: a later run's, when an earlier one ran other keys.
  std::vector<const TraceEvent*> latest(int pid, const std::string& category,
                                        const std::string& name) const {
    auto it = by_key_.find({pid, category, name});
    const size_t have = it == by_key_.end() ? 0 : it->second.size();
    if (have < static_cast<size_t>(iterations_))
      throw RuntimeCheckError(cat("profile: '", name, "' (", category, ") ran ", have,
                                  " times, fewer than the ", iterations_, " measured iterations"));
    return {it->second.end() - iterations_, it->second.end()};
  }
  int iterations() const { return iterations_; }

 private:
  std::vector<TraceEvent> events_;
  int warmup_, iterations_;
  std::map<std::tuple<int, std::string, std::string>, std::vector<const TraceEvent*>> by_key_;
};

// One worker's layer times in one pass ("forward" or "backward"), [layer][measured iteration]:
// from the end of the pass's previous layer on the stream to the end of this one, so that a
// stream's wait between layers (for its issuing thread, on a shared host) counts as the layer's.
// The pass's first layer and the input layer (issued before the forward marks) count alone.
using PassTimes = std::vector<std::vector<double>>;
PassTimes pass_times(const Net<float>& net, const Spans& spans, int worker, const char* category) {
  const int layers = net.num_layers(), iterations = spans.iterations();
  const bool forward = std::string_view(category) == "forward";
  PassTimes us(layers, std::vector<double>(iterations, 0.0));
  std::vector<double> previous_end(iterations, -1);
  for (int j = 0; j < layers; ++j) {
    const int i = forward ? j : layers - 1 - j;
    const auto each = spans.measured(worker, category, net.layer(i).name());
    for (size_t k = 0; k < each.size(); ++k) {
      const double own = double(each[k]->duration_us()), end = double(each[k]->end_us);
      if (net.layer(i).is_input()) {
        us[i][k] = own;
        continue;
      }
      us[i][k] = previous_end[k] < 0 ? own : std::max(own, end - previous_end[k]);
      previous_end[k] = end;
    }
  }
  return us;
}

// Both passes of every worker.
struct WorkerPasses {
  PassTimes forward, backward;
};
std::vector<WorkerPasses> all_passes(const Net<float>& net, const Spans& spans, int workers) {
  std::vector<WorkerPasses> out;
  for (int w = 0; w < workers; ++w)
    out.push_back({pass_times(net, spans, w, "forward"), pass_times(net, spans, w, "backward")});
  return out;
}

double pass_total(const PassTimes& pass, int k) {
  double total = 0;
  for (const auto& layer : pass) total += layer[k];
  return total;
}

// Per measured iteration, the worker whose layers took longest in all: every chunk's sum waits
// for its copy, so the iteration goes at its pace (on a shared host the workers' paces differ).
std::vector<int> slowest_workers(const std::vector<WorkerPasses>& passes, int iterations) {
  std::vector<int> slowest(iterations, 0);
  std::vector<double> longest(iterations, -1);
  for (size_t w = 0; w < passes.size(); ++w)
    for (int k = 0; k < iterations; ++k) {
      const double total = pass_total(passes[w].forward, k) + pass_total(passes[w].backward, k);
      if (total > longest[k]) longest[k] = total, slowest[k] = static_cast<int>(w);
    }
  return slowest;
}

// Each pass's layer medians (pace: the slowest worker of each iteration), scaled to sum to the
// pass's median total. On shared cores a preemption lands in one layer per iteration, so small
// layers' medians miss it, and their sum fell to half the pass (resnet_small, 4 workers).
std::vector<double> pass_medians(const std::vector<WorkerPasses>& passes,
                                 const std::vector<int>& pace, PassTimes WorkerPasses::*which) {
  const int iterations = static_cast<int>(pace.size());
  std::vector<double> layers, totals;
  for (size_t i = 0; i < (passes[0].*which).size(); ++i) {
    std::vector<double> us;
    for (int k = 0; k < iterations; ++k) us.push_back((passes[pace[k]].*which)[i][k]);
    layers.push_back(median(us));
  }
  for (int k = 0; k < iterations; ++k) totals.push_back(pass_total(passes[pace[k]].*which, k));
  double sum = 0;
  for (double us : layers) sum += us;
  const double scale = sum > 0 ? median(totals) / sum : 1.0;
  for (double& us : layers) us *= scale;
  return layers;
}

std::vector<LayerCost> layer_costs(const Net<float>& net, const Spans& spans, int workers) {
  const auto passes = all_passes(net, spans, workers);
  const std::vector<int> pace = slowest_workers(passes, spans.iterations());
  const auto forward = pass_medians(passes, pace, &WorkerPasses::forward);
  const auto backward = pass_medians(passes, pace, &WorkerPasses::backward);
  std::vector<LayerCost> layers;
  for (int i = 0; i < net.num_layers(); ++i) {
    const auto& layer = net.layer(i);
    const auto [begin, end] = net.layer_param_range(i);
    layers.push_back({layer.name(), layer.type(), forward[i], backward[i],
                      (end - begin) * static_cast<int64_t>(sizeof(float))});
  }
  return layers;
}

// Which layers run another's work: a ReLU absorbed by the layer before it, a Scale inside its
// BatchNorm (Net::absorb_relus, Net::fuse_batch_norm_scales).
std::vector<std::string> where_layers_run(const Net<float>& net) {
  std::vector<std::string> runs(net.num_layers());
  const auto batch_norm_with_scale = [&](int i) {
    const auto* bn = i >= 0 ? dynamic_cast<const BatchNormLayer<float>*>(&net.layer(i)) : nullptr;
    return bn && bn->took_over_scale();
  };
  for (int i = 1; i < net.num_layers(); ++i) {
    // A ReLU after a Scale inside its BatchNorm runs in the BatchNorm's forward.
    const int host = batch_norm_with_scale(i - 2) ? i - 2 : i - 1;
    if (net.absorbed(i))
      runs[i] = cat("in ", net.layer(host).name());
    else if (net.forward_absorbed(i))
      runs[i] = cat("forward in ", net.layer(host).name());
    if (!batch_norm_with_scale(i - 1)) continue;
    const std::string& bn = net.layer(i - 1).name();
    const std::string& scale = net.layer(i).name();
    const bool relu = i + 1 < net.num_layers() && net.forward_absorbed(i + 1);
    runs[i - 1] = cat("runs ", scale, relu ? cat(" and ", net.layer(i + 1).name()) : "",
                      "'s forward; backward in ", scale);
    runs[i] = cat("forward in ", bn, "; runs ", bn, "'s backward");
  }
  return runs;
}

// The whole backward pass on the slowest worker of each iteration, median over iterations.
double backward_pass_us(const Net<float>& net, const Spans& spans, int workers) {
  const auto passes = all_passes(net, spans, workers);
  const std::vector<int> pace = slowest_workers(passes, spans.iterations());
  std::vector<double> total;
  for (int k = 0; k < spans.iterations(); ++k)
    total.push_back(pass_total(passes[pace[k]].backward, k));
  return median(total);
}

// The per-layer chunks' run: its backward, and how long the stages of every chunk but the last
// took (the copies as a mean over workers), which ran beside the layers.
struct PerLayerRun {
  double backward_us = 0;
  double stages_beside_us = 0;
};

// Per measured iteration, the D2H, sum and H2D spans of chunks 0..chunks-2 (copies: the mean
// over workers), added up; the median over iterations.
double stages_beside_us(const Spans& spans, int workers, int chunks) {
  std::vector<double> total(spans.iterations(), 0.0);
  for (int c = 0; c + 1 < chunks; ++c) {
    for (const char* copy : {"d2h", "h2d"})
      for (int w = 0; w < workers; ++w) {
        const auto each = spans.latest(w, copy, cat(copy, " chunk ", c));
        for (int k = 0; k < spans.iterations(); ++k)
          total[k] += each[k]->duration_us() / double(workers);
      }
    const auto sums = spans.latest(Timeline::kAggregatorPid, "sum", cat("sum chunk ", c));
    for (int k = 0; k < spans.iterations(); ++k) total[k] += double(sums[k]->duration_us());
  }
  return median(total);
}

PerLayerRun per_layer_run(Trainer& trainer, const ProfileOptions& options) {
  const ChunkPlan plan = per_layer_plan(trainer.param_layers());
  trainer.set_chunk_plan(plan);
  for (int k = 0; k < options.warmup + options.iterations; ++k) trainer.train_iteration();
  const Spans spans(trainer.timeline().events(), 2 * options.warmup + options.iterations,
                    options.iterations);
  const int n = trainer.num_workers();
  return {backward_pass_us(trainer.net(), spans, n),
          stages_beside_us(spans, n, static_cast<int>(plan.chunks.size()))};
}

// The per-iteration parameter work (the gradient reset at its start and the solver step), on
// the worker that took longest at it (the iteration ends with the last), median over iterations.
double update_us(const Spans& spans, int workers) {
  std::vector<double> longest(spans.iterations(), 0.0);
  for (int w = 0; w < workers; ++w) {
    const auto reset = spans.durations(w, "update", "zero gradients");
    const auto step = spans.durations(w, "update", "update");
    for (int k = 0; k < spans.iterations(); ++k)
      longest[k] = std::max(longest[k], reset[k] + step[k]);
  }
  return median(longest);
}

// One sync point, as a real iteration pays it: from the end of the chunk's completing backward
// to the start of its D2H copy (event record, the D2H stream's wait), averaged over workers, plus
// from the last copy's end to the start of the host sum (host callback, aggregator wake-up).
double sync_us(const Net<float>& net, const Spans& spans, int workers) {
  const Chunk chunk = single_chunk_plan(param_layers(net)).chunks.at(0);
  const std::string& completing = net.layer(chunk.completing_layer).name();
  const auto sums = spans.measured(Timeline::kAggregatorPid, "sum", "sum chunk 0");
  std::vector<double> per_iteration;
  for (int k = 0; k < spans.iterations(); ++k) {
    double wait = 0, last_copy_end = 0;
    for (int w = 0; w < workers; ++w) {
      const TraceEvent& copy = *spans.measured(w, "d2h", "d2h chunk 0").at(k);
      wait +=
          double(copy.begin_us - spans.measured(w, "backward", completing).at(k)->end_us) / workers;
      last_copy_end = std::max(last_copy_end, double(copy.end_us));
    }
    per_iteration.push_back(std::max(0.0, wait) +
                            std::max(0.0, sums.at(k)->begin_us - last_copy_end));
  }
  return median(per_iteration);
}

// Sizes min, 4 min, 16 min, ... and max itself.
std::vector<int64_t> geometric_sizes(int64_t min, int64_t max) {
  std::vector<int64_t> sizes;
  for (int64_t s = min; s < max; s *= 4) sizes.push_back(s);
  sizes.push_back(max);
  return sizes;
}

// Issues `issue(w, bytes)` on the `stream` of every worker in `workers` at once, between
// stream-order stamps, `repeats` times per size (all finish a size before the next); per size,
// the median over repeats of the mean over workers.
template <typename Issue>
std::vector<TimedBytes> time_on_streams(const std::vector<Worker*>& workers,
                                        std::unique_ptr<Stream> Worker::*stream,
                                        const std::vector<int64_t>& sizes, int repeats,
                                        Issue issue) {
  const size_t n = workers.size();
  std::vector<double> begin(n * repeats), end(n * repeats);
  auto sync = [&] {
    for (Worker* w : workers) synchronize_stream(*w, *(w->*stream), "profiled", 0);
  };
  for (Worker* w : workers) issue(*w, sizes.back());  // first touch, outside the measurement
  sync();
  std::vector<TimedBytes> points;
  for (int64_t bytes : sizes) {
    for (size_t w = 0; w < n; ++w)
      for (int r = 0; r < repeats; ++r) {
        stamp(*(workers[w]->*stream), &begin[w * repeats + r]);
        issue(*workers[w], bytes);
        stamp(*(workers[w]->*stream), &end[w * repeats + r]);
      }
    sync();
    std::vector<double> us(repeats, 0.0);
    for (size_t i = 0; i < n * repeats; ++i) us[i % repeats] += (end[i] - begin[i]) / double(n);
    points.push_back({double(bytes), median(us)});
  }
  return points;
}

std::vector<Worker*> pointers(std::vector<Worker>& workers) {
  std::vector<Worker*> all;
  for (Worker& w : workers) all.push_back(&w);
  return all;
}

struct LinkFits {
  LinkCost alone;          // one device at a time, times averaged over the devices
  double shared_gbps = 0;  // all devices at once: bytes per second of all copies together
};

// One kind of copy: each device alone, then all N at once (the bandwidth they share, if any).
template <typename Issue>
LinkFits measure_link(std::vector<Worker>& workers, std::unique_ptr<Stream> Worker::*stream,
                      const std::vector<int64_t>& sizes, int repeats, Issue issue) {
  std::vector<TimedBytes> alone(sizes.size());
  for (Worker& w : workers) {
    const auto points = time_on_streams({&w}, stream, sizes, repeats, issue);
    for (size_t i = 0; i < sizes.size(); ++i)
      alone[i] = {points[i].bytes, alone[i].us + points[i].us / double(workers.size())};
  }
  LinkFits fits{fit_link(alone), 0};
  if (workers.size() > 1)
    fits.shared_gbps =
        fit_link(time_on_streams(pointers(workers), stream, sizes, repeats, issue)).gbps *
        double(workers.size());
  return fits;
}

// D2H, H2D and device-to-device copies (to the next worker's device, as ps0's tree sends). When N
// copies at once move less than N alone would (within 10%), their total is the shared host
// memory bandwidth (Profile::host_memory_gbps: the mean of the two directions).
void measure_links(std::vector<Worker>& workers, const ProfileOptions& o, Profile& p) {
  const auto sizes = geometric_sizes(o.min_copy_bytes, o.max_copy_bytes);
  const size_t bytes = static_cast<size_t>(sizes.back());
  std::vector<DeviceBuffer> device, peer;
  std::vector<PinnedHostBuffer> host;
  for (size_t w = 0; w < workers.size(); ++w) {
    device.emplace_back(*workers[w].device, bytes);
    peer.emplace_back(*workers[(w + 1) % workers.size()].device, bytes);
    host.emplace_back(*workers[w].device, bytes);
  }
  auto copy = [&](auto* dst, auto* src, std::unique_ptr<Stream> Worker::*stream) {
    return [dst, src, stream](Worker& w, int64_t n) {
      (w.*stream)->copy_async((*dst)[w.index].get(), (*src)[w.index].get(), static_cast<size_t>(n));
    };
  };
  const LinkFits d2h =
      measure_link(workers, &Worker::d2h, sizes, o.repeats, copy(&host, &device, &Worker::d2h));
  const LinkFits h2d =
      measure_link(workers, &Worker::h2d, sizes, o.repeats, copy(&device, &host, &Worker::h2d));
  const LinkFits p2p =
      measure_link(workers, &Worker::d2h, sizes, o.repeats, copy(&peer, &device, &Worker::d2h));
  p.d2h = d2h.alone;
  p.h2d = h2d.alone;
  p.p2p = p2p.alone;
  const double n = double(workers.size());
  if (n > 1 &&
      (d2h.shared_gbps < 0.9 * n * d2h.alone.gbps || h2d.shared_gbps < 0.9 * n * h2d.alone.gbps))
    p.host_memory_gbps = (d2h.shared_gbps + h2d.shared_gbps) / 2;
}

// Chunk-like sizes: each param layer's gradient bytes and the whole gradient, capped.
std::vector<int64_t> sum_sizes(const Net<float>& net, int64_t cap) {
  std::vector<int64_t> sizes;
  for (const ParamLayer& l : param_layers(net)) sizes.push_back(std::min(l.count * 4, cap));
  sizes.push_back(std::min(net.learnable_count() * 4, cap));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// Host time of one sum_buffers call, median over repeats; tiny sums are repeated within a sample
// so that the clock's resolution does not matter.
double time_host_sum(float* dst, std::span<const float* const> srcs, int64_t count, int threads,
                     int repeats) {
  const int inner =
      static_cast<int>(std::clamp<int64_t>((int64_t{256} << 10) / (count * 4), 1, 1024));
  sum_buffers(dst, srcs, count, threads);  // first touch
  std::vector<double> us;
  for (int r = 0; r < repeats; ++r) {
    const double begin = now_us();
    for (int i = 0; i < inner; ++i) sum_buffers(dst, srcs, count, threads);
    us.push_back((now_us() - begin) / inner);
  }
  return median(us);
}

// Host sums of 1..max_inputs inputs in pinned memory, on a thread of its own as the aggregator's
// (so OpenMP's defaults are the aggregator's, not the trainer thread's).
std::vector<HostSumCost> measure_host_sums(std::vector<Worker>& workers,
                                           const std::vector<int64_t>& sizes, size_t max_inputs,
                                           int threads, int repeats, int* resolved_threads) {
  const int64_t count = sizes.back() / 4;
  std::vector<PinnedHostBuffer> inputs;
  for (size_t w = 0; w <= max_inputs; ++w)
    inputs.emplace_back(*workers[std::min(w, workers.size() - 1)].device, count * 4);
  std::vector<const float*> srcs;
  for (size_t w = 0; w < max_inputs; ++w)
    srcs.push_back(static_cast<const float*>(inputs[w].get()));
  float* dst = static_cast<float*>(inputs.back().get());
  std::vector<HostSumCost> costs;
  std::thread([&] {
    *resolved_threads = threads > 0 ? threads : omp_get_max_threads();
    for (size_t k = 1; k <= max_inputs; ++k) {
      std::vector<TimedBytes> points;
      // The rate of a full team: a size summed by fewer threads (sum_team) counts as the bytes
      // the whole team would have summed in its time, as host_sum_us charges it.
      for (int64_t bytes : sizes)
        points.push_back(
            {double(bytes) * *resolved_threads / sum_team(bytes / 4, *resolved_threads),
             time_host_sum(dst, {srcs.data(), k}, bytes / 4, threads, repeats)});
      costs.push_back({static_cast<int>(k), fit_gbps(points)});
    }
  }).join();
  return costs;
}

// ps0's parent step: a child's gradients added into the parent's on the parent's compute stream
// (device_sum.hpp, as ps0_sync.cpp adds), every worker at once, at the whole gradient's size
// (capped).
double measure_device_sum(std::vector<Worker>& workers, int64_t bytes, int repeats) {
  const int64_t count = bytes / 4;
  std::vector<DeviceBuffer> a, b;
  for (Worker& w : workers) {
    a.emplace_back(*w.device, count * 4);
    b.emplace_back(*w.device, count * 4);
  }
  auto add = [&](Worker& w, int64_t n) {
    float* sum = static_cast<float*>(a[w.index].get());
    issue_sum(*w.compute, w.device->kind(), sum, {sum, static_cast<const float*>(b[w.index].get())},
              n / 4);
  };
  const auto points =
      time_on_streams(pointers(workers), &Worker::compute, {count * 4}, repeats, add);
  return fit_gbps(points);
}

// The factor rebuild from bf16 rows against fp32 rows (sufficient_factors.hpp), on worker 0's
// compute stream, for the largest weight that rebuilds from bf16 at all N workers' rows; 1 when
// none does (the CPU backend widens the rows first). Zero rows time the GEMM as well as any.
double measure_rebuild_bf16_speedup(Trainer& trainer, int repeats) {
  Worker& w = *trainer.workers().begin();
  SufficientFactors<float>* layer = nullptr;
  int64_t largest = 0;
  for (int i = 0; i < w.net->num_layers(); ++i) {
    auto* f = dynamic_cast<SufficientFactors<float>*>(&w.net->layer(i));
    if (!f || !f->rebuilds_from_bf16()) continue;
    const FactorShape s = f->factor_shape();
    if (s.outputs * s.inputs > largest) layer = f, largest = s.outputs * s.inputs;
  }
  if (!layer) return 1;
  const FactorShape s = layer->factor_shape();
  const int64_t rows = s.rows * trainer.num_workers();
  const int64_t elements = rows * (s.outputs + s.inputs);
  DeviceBuffer fp32(*w.device, elements * sizeof(float)), bf16(*w.device, elements * 2);
  w.compute->zero_async(fp32.get(), elements * sizeof(float));
  w.compute->zero_async(bf16.get(), elements * 2);
  RunContext ctx;
  ctx.stream = w.compute.get();
  const auto* rows32 = static_cast<const float*>(fp32.get());
  const auto* rows16 = static_cast<const uint16_t*>(bf16.get());
  const auto time = [&](auto rebuild) {
    const auto points = time_on_streams({&w}, &Worker::compute, {elements}, repeats,
                                        [&](Worker&, int64_t) { rebuild(); });
    return points[0].us;
  };
  const double us32 =
      time([&] { layer->rebuild_weight_diff(ctx, rows32, rows32 + rows * s.outputs, rows); });
  const double us16 =
      time([&] { layer->rebuild_weight_diff_bf16(ctx, rows16, rows16 + rows * s.outputs, rows); });
  return us16 > 0 ? us32 / us16 : 1;
}

// The training run both commands start with, and what it says of each layer.
Profile layer_profile(Trainer& trainer, const TrainConfig& config, const ProfileOptions& options) {
  for (int k = 0; k < options.warmup + options.iterations; ++k) trainer.train_iteration();
  const Worker& first = trainer.workers()[0];
  const Spans spans(trainer.timeline().events(), options.warmup, options.iterations);
  Profile p;
  p.model = config.model;
  p.backend = to_string(first.device->kind());
  p.device = first.device->name();
  p.precision = config.precision;
  p.devices = trainer.num_workers();
  p.batch = static_cast<int>(trainer.net().batch_size());
  p.layers = layer_costs(trainer.net(), spans, p.devices);
  return p;
}

}  // namespace

std::vector<LayerCost> layer_costs_from_timeline(const Net<float>& net,
                                                 std::vector<TraceEvent> events, int warmup,
                                                 int iterations, int workers) {
  return layer_costs(net, Spans(std::move(events), warmup, iterations), workers);
}

// The loader alone, on the trainer's training split and threads: a rate per thread.
LoaderCost measure_loader(const Trainer& trainer, int64_t samples) {
  const int threads = trainer.train_loader_threads();
  const LoaderRate rate = measure_loader_rate(trainer.train_data(), samples, threads, 2.0, 4,
                                              /*seed=*/1, trainer.loader_binding());
  return {rate.images_per_s / threads, threads,
          cat(trainer.train_data()->describe(), ", ", shape_string(trainer.train_data()->sample_shape()))};
}

LayerTimes measure_layer_times(const TrainConfig& config, const ProfileOptions& options) {
  check_options(options);
  Trainer trainer(profiling_config(config, options));
  LayerTimes times{layer_profile(trainer, config, options), {}};
  times.runs = where_layers_run(trainer.net());
  return times;
}

Profile measure_profile(const TrainConfig& config, const ProfileOptions& options) {
  check_options(options);
  Trainer trainer(profiling_config(config, options));
  const Net<float>& net = trainer.net();
  if (net.learnable_count() == 0)
    throw ModelError(
        cat(config.model, ": no learnable parameters, nothing to exchange or profile"));
  Profile p = layer_profile(trainer, config, options);
  std::vector<Worker>& workers = trainer.workers();
  const int n = trainer.num_workers();
  const Spans spans(trainer.timeline().events(), options.warmup, options.iterations);
  p.sync_us = sync_us(net, spans, n);
  const double param_bytes = static_cast<double>(net.learnable_count()) * 4;
  p.update_gbps = param_bytes / std::max(update_us(spans, n), 1.0) / 1e3;
  // CPU workers compute on the host's cores, where the copies and the sum run too.
  const bool shared = workers[0].device->kind() == DeviceKind::Cpu;
  const bool calibrate = trainer.param_layers().size() > 1;  // one layer: nothing runs beside
  const PerLayerRun layered = calibrate ? per_layer_run(trainer, options) : PerLayerRun{};
  measure_links(workers, options, p);
  const auto sizes = sum_sizes(net, options.max_sum_bytes);
  const size_t sum_inputs = options.sum_inputs > 0 ? options.sum_inputs : workers.size();
  p.host_sum = measure_host_sums(workers, sizes, sum_inputs, trainer.sum_threads(),
                                 options.repeats, &p.host_threads);
  p.device_sum_gbps = measure_device_sum(workers, sizes.back(), options.repeats);
  if (trainer.train_data()->decodes()) p.loader = measure_loader(trainer, p.batch * n);
  // What the exchange beside the backward costs it: on shared cores, a factor on the cores it
  // takes; on a GPU, time per MB (copies take device memory bandwidth). One measurement, so one.
  // Then, on shared cores, how much the layers slow the exchange beside them.
  if (shared) {
    p.shared_cores = omp_get_num_procs();
    if (calibrate) {
      p.contention_factor = contention_factor(p, trainer.param_layers(),
                                              backward_pass_us(net, spans, n), layered.backward_us);
      p.exchange_stretch = exchange_stretch(p, trainer.param_layers(), layered.stages_beside_us);
    }
  } else if (calibrate) {
    p.overlap_us_per_mb = overlap_us_per_mb(trainer.param_layers(), backward_pass_us(net, spans, n),
                                            layered.backward_us);
  }
  p.rebuild_bf16_speedup = measure_rebuild_bf16_speedup(trainer, options.repeats);
  return p;
}

}  // namespace cgdp
