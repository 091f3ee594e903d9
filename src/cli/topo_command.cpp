// `cgdp topo`: the NUMA nodes, cores and GPUs hwloc finds, and where cgdp would place workers,
// aggregator threads and the loader's decode threads on them, as text or JSON.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/topology.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

namespace {

struct TopoOptions {
  int devices = 0;  // 0: one per GPU, or 1
  bool cpu = false;
  int aggregator_threads = 0;
  int loader_threads = 0;
  bool json = false;
};

std::vector<DeviceRef> workers_to_plan(const TopoOptions& opt, const Topology& topo) {
  const int gpus = static_cast<int>(topo.gpus.size());
  const bool cpu = opt.cpu || gpus == 0;
  const int n = opt.devices > 0 ? opt.devices : (cpu ? 1 : gpus);
  if (!cpu && n > gpus)
    throw UsageError(cat("--devices ", n, ": only ", gpus, " CUDA GPU", gpus == 1 ? "" : "s",
                         " found; add --cpu to plan CPU workers"));
  std::vector<DeviceRef> workers;
  for (int i = 0; i < n; ++i) workers.push_back({cpu ? DeviceKind::Cpu : DeviceKind::Cuda, i});
  return workers;
}

// Whether this OS lets cgdp bind memory to each node the plan uses (containers often forbid it).
std::map<int, BindStatus> probe_memory_binding(const Placement& plan) {
  std::map<int, BindStatus> status;
  for (const auto& w : plan.workers) {
    if (status.count(w.numa_node)) continue;
    const NodeAllocation probe = alloc_on_node(4096, w.numa_node);
    free_on_node(probe.ptr, 4096);
    status[w.numa_node] = probe.status;
  }
  return status;
}

nlohmann::json describe(const Topology& topo, const Placement& plan,
                        const std::map<int, BindStatus>& membind) {
  nlohmann::json nodes = nlohmann::json::array(), gpus = nlohmann::json::array(),
                 workers = nlohmann::json::array(), threads = nlohmann::json::array(),
                 binding = nlohmann::json::array();
  for (const auto& n : topo.numa_nodes)
    nodes.push_back({{"node", n.os_index},
                     {"cpus", n.cpus.to_string()},
                     {"cores", n.cores},
                     {"memory_bytes", n.memory_bytes}});
  for (const auto& g : topo.gpus)
    gpus.push_back({{"cuda", g.cuda_index},
                    {"pci_bus_id", g.pci_bus_id},
                    {"numa_node", g.numa_node},
                    {"cpus", g.cpus.to_string()}});
  for (const auto& w : plan.workers)
    workers.push_back({{"device", to_string(w.device)},
                       {"numa_node", w.numa_node},
                       {"cpus", w.cpus.to_string()},
                       {"issue_cpus", w.issue_cpus.empty() ? "any" : w.issue_cpus.to_string()},
                       {"reason", w.reason}});
  for (const auto& t : plan.aggregator_threads) threads.push_back(t.to_string());
  for (const auto& [node, status] : membind)
    binding.push_back({{"node", node}, {"bound", status.bound}, {"note", status.note}});
  return {
      {"numa_nodes", nodes},
      {"cores", topo.cores.size()},
      {"pus", topo.pus},
      {"gpus", gpus},
      {"gpu_note", topo.gpu_note},
      {"memory_binding", binding},
      {"placement",
       {{"workers", workers},
        {"aggregator_threads", threads},
        {"loader", {{"threads", plan.loader_threads}, {"cpus", plan.loader_cpus.to_string()}, {"reason", plan.loader_reason}}},
        {"single_node", plan.single_node}}}};
}

void print_report(const Topology& topo, const Placement& plan,
                  const std::map<int, BindStatus>& membind) {
  std::printf("NUMA nodes: %zu, cores: %zu, logical CPUs: %d\n", topo.numa_nodes.size(),
              topo.cores.size(), topo.pus);
  for (const auto& n : topo.numa_nodes)
    std::printf("  node %d: %d cores, CPUs %s, %.1f GiB\n", n.os_index, n.cores,
                n.cpus.to_string().c_str(), static_cast<double>(n.memory_bytes) / (1 << 30));
  if (topo.gpus.empty())
    std::printf("GPUs: %s\n", topo.gpu_note.c_str());
  else
    std::printf("GPUs: %zu\n", topo.gpus.size());
  for (const auto& g : topo.gpus) {
    if (g.numa_node < 0)
      std::printf("  cuda:%d (PCI %s): locality unknown (hwloc did not find the PCI device)\n",
                  g.cuda_index, g.pci_bus_id.c_str());
    else
      std::printf("  cuda:%d (PCI %s): NUMA node %d, near CPUs %s\n", g.cuda_index,
                  g.pci_bus_id.c_str(), g.numa_node, g.cpus.to_string().c_str());
  }
  for (const auto& [node, status] : membind)
    std::printf("memory binding on node %d: %s\n", node,
                status.bound ? "works" : status.note.c_str());
  std::printf("placement for %zu worker%s and %zu aggregator thread%s:\n", plan.workers.size(),
              plan.workers.size() == 1 ? "" : "s", plan.aggregator_threads.size(),
              plan.aggregator_threads.size() == 1 ? "" : "s");
  for (const auto& w : plan.workers) {
    const std::string issues =
        w.issue_cpus.empty() ? "" : cat(", issues from CPUs ", w.issue_cpus.to_string());
    std::printf("  %s -> NUMA node %d, CPUs %s (%s)%s\n", to_string(w.device).c_str(), w.numa_node,
                w.cpus.to_string().c_str(), w.reason.c_str(), issues.c_str());
  }
  std::string threads;
  for (const auto& cpus : plan.aggregator_threads)
    threads += cat(threads.empty() ? "" : " | ", cpus.to_string());
  std::printf("  aggregator threads (thread 0 first), one core each: CPUs %s\n", threads.c_str());
  std::printf("  loader: %d decode thread%s on CPUs %s (%s)\n", plan.loader_threads,
              plan.loader_threads == 1 ? "" : "s", plan.loader_cpus.to_string().c_str(),
              plan.loader_reason.c_str());
  if (plan.single_node)
    std::printf("single NUMA node: all workers and aggregator threads share node %d\n",
                topo.numa_nodes.front().os_index);
}

}  // namespace

Runner add_topo_command(CLI::App& app) {
  auto opt = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "topo", "Print the NUMA nodes, cores and GPUs found, and where workers, sums and loader threads go");
  cmd->add_option("--devices", opt->devices, "Workers to plan for (default: one per GPU, or 1)")
      ->check(kPositive);
  cmd->add_flag("--cpu", opt->cpu, "Plan CPU workers (the default when there is no GPU)");
  cmd->add_option("--aggregator-threads", opt->aggregator_threads,
                  "Aggregator threads to place (default: one per worker, leaving a core per worker)")
      ->check(kPositive);
  cmd->add_option("--loader-threads", opt->loader_threads,
                  "Loader threads to place (default: the cores left after workers and --aggregator-threads)")
      ->check(kPositive);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  return [opt] {
    const Topology topo = Topology::discover();
    const Placement plan =
        plan_placement(topo, workers_to_plan(*opt, topo), opt->aggregator_threads, opt->loader_threads);
    const auto membind = probe_memory_binding(plan);
    if (opt->json)
      std::cout << describe(topo, plan, membind).dump(2) << "\n";
    else
      print_report(topo, plan, membind);
    return 0;
  };
}

}  // namespace cgdp::cli
