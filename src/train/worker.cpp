// Worker: issuing a micro-batch's input, forward, backward and loss read-back on its streams.
#include "cgdp/train/worker.hpp"

#include <omp.h>

#include <algorithm>
#include <map>

#include "cgdp/device/devices.hpp"
#include "cgdp/sync/topology.hpp"
#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

void Worker::issue_input(const Batch& batch, int64_t row_begin, Timeline& timeline) {
  Blob<float>& data = net->input_data();
  Blob<float>* label = net->input_label();  // none in a net that learns from its data alone
  const int64_t rows = data.shape(0);
  traced(*compute, timeline, index, "compute", net->input_layer().name(), "forward", [&] {
    compute->copy_async(data.mutable_data(), batch.images + row_begin * data.count(1), data.bytes());
    if (label)
      compute->copy_async(label->mutable_data(), batch.labels + row_begin * (label->count() / rows),
                          label->bytes());
  });
  compute->record(*input_loaded);
}

void Worker::issue_forward(const RunContext& ctx, Timeline& timeline) {
  mark(*compute, timeline, &marks.forward_begin);
  for (int i = 0; i < net->num_layers(); ++i) {
    offload.before_step(i, *compute, timeline);
    if (!net->layer(i).is_input())
      traced(*compute, timeline, index, "compute", net->layer(i).name(), "forward",
             [&] { net->forward_layer(i, ctx); });
    packing.after_step(i, *compute, timeline);
    offload.after_step(i, *compute, timeline);
  }
  mark(*compute, timeline, &marks.forward_end);
}

void Worker::issue_backward(const RunContext& ctx, Timeline& timeline, int micro, int micros,
                            const std::function<void(int)>& after_layer) {
  const bool accumulating = micros > 1, last = micro + 1 == micros;
  float* diff = net->flat_diff().data();
  if (micro > 0) net->zero_param_diffs(*compute);
  const int steps = 2 * net->num_layers();
  for (int i = net->num_layers() - 1; i >= 0; --i) {
    offload.before_step(steps - 1 - i, *compute, timeline);
    packing.before_step(steps - 1 - i, *compute, timeline);
    if (net->needs_backward(i))
      traced(*compute, timeline, index, "compute", net->layer(i).name(), "backward",
             [&] { net->backward_layer(i, ctx); });
    const auto [begin, end] = net->layer_param_range(i);
    if (accumulating && last && end > begin) fold.fold_into(*device, *compute, diff, begin, end, micro);
    if (after_layer) after_layer(i);
    offload.after_step(steps - 1 - i, *compute, timeline);
  }
  const std::span<float> streamed = net->host_flat_diff();  // final once the backward has run
  const auto streamed_count = static_cast<int64_t>(streamed.size());
  if (accumulating && !last) {
    fold.add(*device, *compute, diff, net->device_learnable_count(), micro);
    if (streamed_count)
      streamed_fold.add(*device, *compute, streamed.data(), streamed_count, micro);
  }
  if (accumulating && last && streamed_count)
    streamed_fold.fold_into(*device, *compute, streamed.data(), 0, streamed_count, micro);
  mark(*compute, timeline, &marks.backward_end);
}

void Worker::issue_loss_readback(int micro) {
  auto* slots = static_cast<float*>(loss_slots.get()) + micro * loss_tops.size();
  for (size_t j = 0; j < loss_tops.size(); ++j)
    compute->copy_async(slots + j, loss_tops[j].first->data(), sizeof(float));
}

double Worker::loss(int micro) const {
  const auto* slots = static_cast<const float*>(loss_slots.get()) + micro * loss_tops.size();
  double sum = 0;
  for (size_t j = 0; j < loss_tops.size(); ++j) sum += loss_tops[j].second * static_cast<double>(slots[j]);
  return sum;
}

DeviceRef worker_device(int w, DeviceKind kind, int gpus) {
  return {kind, kind == DeviceKind::Cuda ? w % std::max(gpus, 1) : w};
}

std::vector<Worker> make_workers(int count, DeviceKind kind, const proto::NetParameter& model,
                                 int64_t batch, uint64_t seed, const std::string& source,
                                 int max_micro_batches, const ActivationMemoryPlan& activations) {
  std::vector<Worker> workers(count);
  const int gpus = kind == DeviceKind::Cuda ? cuda_device_count() : 0;
  // Each GPU's pinned host memory (the D2H/H2D buffers) goes to the GPU's own NUMA node.
  std::vector<int> gpu_nodes;
  if (kind == DeviceKind::Cuda)
    for (const GpuLocality& gpu : Topology::discover().gpus) gpu_nodes.push_back(gpu.numa_node);
  for (int w = 0; w < count; ++w) {
    Worker& worker = workers[w];
    worker.index = w;
    const DeviceRef ref = worker_device(w, kind, gpus);
    const int node = kind == DeviceKind::Cuda && ref.index < static_cast<int>(gpu_nodes.size())
                         ? gpu_nodes[ref.index]
                         : -1;
    worker.device = make_device(kind, ref.index, node);
    worker.compute = worker.device->create_stream(cat("w", w, "-compute"));
    worker.d2h = worker.device->create_stream(cat("w", w, "-d2h"));
    worker.h2d = worker.device->create_stream(cat("w", w, "-h2d"));
    worker.input_loaded = worker.device->create_event();
    if (kind == DeviceKind::Cpu) {
      // CPU workers split the cores between them instead of each starting a full OpenMP team.
      const int share = std::max(1, omp_get_max_threads() / count);
      worker.compute->submit([share] { omp_set_num_threads(share); });
    }
    // Same seed everywhere: every replica starts from the same parameters.
    worker.net =
        std::make_unique<Net<float>>(model, Phase::Train, *worker.device, batch, seed, source,
                                     activations.memory, nullptr, activations.streamed_weights);
    if (activations.memory == ActivationMemory::Planned) {
      worker.net->plan_activations(activations.arena_limit, nullptr, activations.pack,
                                   activations.write_over);
      worker.offload = OffloadSchedule(*worker.device, worker.net->activation_plan(), w);
      worker.packing = PackSchedule(kind, layer_precision(), worker.net->activation_plan(), w);
    }
    worker.loss_tops = worker.net->loss_tops();
    worker.loss_slots = PinnedHostBuffer(*worker.device, sizeof(float) * worker.loss_tops.size() *
                                                             static_cast<size_t>(max_micro_batches));
  }
  return workers;
}

std::vector<std::string> device_notes(const std::vector<Worker>& workers) {
  std::vector<std::string> lines;
  if (workers.empty() || workers[0].device->kind() != DeviceKind::Cuda) return lines;
  std::map<int, std::vector<int>> by_gpu;
  for (const Worker& w : workers) by_gpu[w.device->index()].push_back(w.index);
  if (by_gpu.size() < workers.size()) {
    std::string map;
    for (const auto& [gpu, ws] : by_gpu) {
      map += cat(map.empty() ? "" : "; ", "cuda:", gpu, ": worker", ws.size() > 1 ? "s" : "");
      for (size_t i = 0; i < ws.size(); ++i) map += cat(i ? "," : " ", ws[i]);
    }
    lines.push_back(cat(workers.size(), " workers share ", by_gpu.size(), " GPU",
                        by_gpu.size() > 1 ? "s" : "", " round-robin (", map,
                        "), each worker with its own streams and memory"));
  }
  for (const Worker& w : workers)
    if (std::string note = w.device->pinned_memory_note(); !note.empty())
      lines.push_back(cat("worker ", w.index, " (", w.device->name(), "): ", note));
  return lines;
}

void synchronize_all(std::vector<Worker>& workers, int64_t iteration) {
  std::exception_ptr first;
  for (Worker& w : workers)
    for (auto [stream, name] : {std::pair{w.compute.get(), "compute"},
                                {w.d2h.get(), "d2h"},
                                {w.h2d.get(), "h2d"},
                                {w.offload.out_stream(), "offload-out"},
                                {w.offload.in_stream(), "offload-in"}}) {
      if (!stream) continue;
      try {
        synchronize_stream(w, *stream, name, iteration);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
  if (first) std::rethrow_exception(first);
}

}  // namespace cgdp
