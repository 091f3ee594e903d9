// The placement plan: which NUMA node each worker uses and which core each aggregator thread
// runs on. Pure planning over a Topology, so tests can plan for machines they do not have.
#include <algorithm>
#include <map>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/topology.hpp"

namespace cgdp {

namespace {

const GpuLocality& find_gpu(const Topology& topology, const DeviceRef& device) {
  for (const auto& gpu : topology.gpus)
    if (gpu.cuda_index == device.index) return gpu;
  throw DeviceError(cat(to_string(device), ": no such GPU (", topology.gpus.size(), " found)"));
}

// Nodes a thread can run on: memory-only nodes (no CPUs) take no workers.
std::vector<const NumaNode*> nodes_with_cpus(const Topology& topology) {
  std::vector<const NumaNode*> nodes;
  for (const auto& node : topology.numa_nodes)
    if (!node.cpus.empty()) nodes.push_back(&node);
  CGDP_ASSERT(!nodes.empty());
  return nodes;
}

// The cores that serve the GPUs, by node: those near them, or every core when no GPU is located
// (or only CPU workers run).
std::map<int, std::vector<const CpuCore*>> serving_cores(const Topology& topology, const CoreSet& near_gpus) {
  std::map<int, std::vector<const CpuCore*>> by_node;
  for (const auto& core : topology.cores)
    if (near_gpus.includes(core.cpus)) by_node[core.numa_node].push_back(&core);
  if (by_node.empty())
    for (const auto& core : topology.cores) by_node[core.numa_node].push_back(&core);
  return by_node;
}

// About one sum thread per worker: each worker's copies arrive at one PCIe link's rate, about
// what one core adds; more would take the cores the issuing threads and the loader need.
int default_aggregator_threads(int cores, int workers) {
  return std::clamp(workers, 1, std::max(1, cores - workers));
}

// Aggregator threads sum what the GPUs send, so they sit on the cores near those GPUs, spread
// over the GPUs' nodes: thread t goes to node t mod k, then to that node's cores in turn.
std::vector<CoreSet> place_aggregator(const Topology& topology, const CoreSet& near_gpus,
                                      int threads, int workers) {
  const std::map<int, std::vector<const CpuCore*>> by_node = serving_cores(topology, near_gpus);
  std::vector<const std::vector<const CpuCore*>*> groups;
  size_t candidates = 0;
  for (const auto& [node, cores] : by_node) {
    groups.push_back(&cores);
    candidates += cores.size();
  }
  const size_t n = static_cast<size_t>(
      threads > 0 ? threads : default_aggregator_threads(static_cast<int>(candidates), workers));
  std::vector<CoreSet> placed;
  for (size_t t = 0; t < n; ++t) {
    const auto& cores = *groups[t % groups.size()];
    placed.push_back(cores[(t / groups.size()) % cores.size()]->cpus);
  }
  return placed;
}

// The loader decodes into the pinned batches the GPUs copy from: on the cores that serve them.
void place_loader(const Topology& topology, const CoreSet& near_gpus, int aggregator_threads,
                  int loader_threads, Placement& plan) {
  int cores = 0;
  for (const auto& [node, list] : serving_cores(topology, near_gpus)) {
    cores += static_cast<int>(list.size());
    for (const CpuCore* core : list) plan.loader_cpus = plan.loader_cpus | core->cpus;
  }
  if (loader_threads > 0) {
    plan.loader_threads = loader_threads;
    plan.loader_reason = "as asked";
    return;
  }
  const int workers = static_cast<int>(plan.workers.size());
  const int left = cores - workers - aggregator_threads;
  plan.loader_threads = std::max(1, left);
  plan.loader_reason = cat(cores, " cores", near_gpus.empty() ? "" : " near the GPUs", " - ", workers,
                           " worker", workers == 1 ? "" : "s",
                           aggregator_threads > 0 ? cat(" - ", aggregator_threads, " aggregator thread", aggregator_threads == 1 ? "" : "s") : "",
                           left < 1 ? ", at least 1" : "");
}

// GPU workers leave the cores free of layer work: the aggregator's are kept for its sums, since a
// loader or issuing thread on one of them stalls the whole OpenMP team of each chunk's sum (the
// team waits for its slowest thread). CPU workers compute on every core, the aggregator's too.
void keep_aggregator_cores_apart(Placement& plan) {
  const CoreSet aggregator = plan.aggregator_cpus();
  const CoreSet others = plan.loader_cpus - aggregator;
  if (others.empty()) {
    plan.loader_reason += ", on the aggregator's cores (no other is near the GPUs)";
    return;
  }
  plan.loader_cpus = others;
  for (WorkerPlacement& w : plan.workers) {
    if (w.device.kind != DeviceKind::Cuda) continue;
    const CoreSet own = w.cpus - aggregator;
    w.issue_cpus = own.empty() ? others : own;
  }
}

}  // namespace

CoreSet Placement::aggregator_cpus() const {
  CoreSet all;
  for (const auto& cpus : aggregator_threads) all = all | cpus;
  return all;
}

Placement plan_placement(const Topology& topology, const std::vector<DeviceRef>& workers,
                         int aggregator_threads, int loader_threads, bool host_sums) {
  if (workers.empty()) throw UsageError("placement: no workers to place");
  if (aggregator_threads < 0)
    throw UsageError(cat("placement: aggregator threads must be >= 0, not ", aggregator_threads));
  CGDP_ASSERT(!topology.cores.empty());
  const std::vector<const NumaNode*> nodes = nodes_with_cpus(topology);
  const std::string round_robin = nodes.size() == 1
                                      ? "the only NUMA node with CPUs"
                                      : cat("round-robin over ", nodes.size(), " NUMA nodes");
  Placement plan;
  plan.single_node = topology.numa_nodes.size() == 1;
  size_t next = 0;  // round-robin cursor, shared by every worker without a node of its own
  CoreSet near_gpus;
  for (const DeviceRef& device : workers) {
    if (device.kind == DeviceKind::Cuda) {
      const GpuLocality& gpu = find_gpu(topology, device);
      if (gpu.numa_node >= 0 && !gpu.cpus.empty()) {
        plan.workers.push_back({device, gpu.numa_node, gpu.cpus, "the GPU's NUMA node", {}});
        near_gpus = near_gpus | gpu.cpus;
        continue;
      }
    }
    const NumaNode& node = *nodes[next++ % nodes.size()];
    const char* prefix = device.kind == DeviceKind::Cuda ? "GPU locality unknown: " : "";
    plan.workers.push_back({device, node.os_index, node.cpus, prefix + round_robin, {}});
  }
  plan.aggregator_threads =
      place_aggregator(topology, near_gpus, aggregator_threads, static_cast<int>(workers.size()));
  place_loader(topology, near_gpus, static_cast<int>(plan.aggregator_threads.size()), loader_threads, plan);
  const bool any_gpu = std::any_of(workers.begin(), workers.end(),
                                   [](const DeviceRef& d) { return d.kind == DeviceKind::Cuda; });
  if (any_gpu && host_sums) keep_aggregator_cores_apart(plan);
  return plan;
}

}  // namespace cgdp
