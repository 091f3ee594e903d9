// Machine discovery, the placement plan (on this machine and on described multi-node ones),
// thread and memory binding, and the `cgdp topo` report.
#include "cgdp/sync/topology.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hwloc.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "cgdp/core/error.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;

CoreSet range(int first, int count) {
  std::vector<int> cpus;
  for (int i = 0; i < count; ++i) cpus.push_back(first + i);
  return CoreSet(cpus);
}

// Two nodes of four single-thread cores (CPUs 0-3 and 4-7); cuda:0 on node 1, cuda:1 on node 0,
// cuda:2 somewhere hwloc could not find.
Topology two_node_machine() {
  Topology t;
  t.numa_nodes = {{0, range(0, 4), 4, 1ull << 34}, {1, range(4, 4), 4, 1ull << 34}};
  for (int cpu = 0; cpu < 8; ++cpu) t.cores.push_back({cpu < 4 ? 0 : 1, CoreSet({cpu})});
  t.pus = 8;
  t.gpus = {{0, "0000:81:00.0", 1, range(4, 4)},
            {1, "0000:01:00.0", 0, range(0, 4)},
            {2, "0000:c1:00.0", -1, {}}};
  return t;
}

std::vector<int> bitmap_cpus(hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) cpus.push_back(i);
  return cpus;
}

TEST(CoreSet, SortsDeduplicatesAndPrintsRanges) {
  const CoreSet set({11, 3, 0, 1, 2, 8, 10, 3});
  EXPECT_EQ(set.cpus(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(set.to_string(), "0-3,8,10-11");
  EXPECT_EQ(CoreSet().to_string(), "none");
  EXPECT_EQ((CoreSet({0, 2}) | CoreSet({1, 2})).to_string(), "0-2");
  EXPECT_TRUE(set.includes(CoreSet({8, 10})));
  EXPECT_FALSE(set.includes(CoreSet({8, 9})));
}

TEST(Topology, DiscoveryIsConsistentWithThisMachine) {
  const Topology t = Topology::discover();
  ASSERT_GE(t.numa_nodes.size(), 1u);
  ASSERT_GE(t.cores.size(), 1u);
  EXPECT_LE(static_cast<int>(t.cores.size()), t.pus);
  EXPECT_LE(t.pus, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(static_cast<int>(t.all_cpus().size()), t.pus);
  size_t node_cores = 0;
  for (const auto& node : t.numa_nodes) {
    node_cores += node.cores;
    EXPECT_GT(node.memory_bytes, 0u) << "node " << node.os_index;
  }
  EXPECT_EQ(node_cores, t.cores.size());
  for (const auto& core : t.cores) EXPECT_TRUE(t.node(core.numa_node).cpus.includes(core.cpus));
  EXPECT_EQ(t.gpus.empty(), !t.gpu_note.empty());
  for (const auto& gpu : t.gpus) EXPECT_FALSE(gpu.pci_bus_id.empty());
}

TEST(Topology, UnknownNodeIsNamed) {
  const Topology t = two_node_machine();
  EXPECT_EQ(t.node(1).cpus.to_string(), "4-7");
  try {
    t.node(7);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NUMA node 7: no such node (this machine has 0, 1)"));
  }
}

TEST(Placement, GpuWorkersGoToTheirNodeAndCpuWorkersRoundRobin) {
  const Topology t = two_node_machine();
  const std::vector<DeviceRef> workers = {{DeviceKind::Cuda, 0},
                                          {DeviceKind::Cuda, 1},
                                          {DeviceKind::Cuda, 2},
                                          {DeviceKind::Cpu, 0},
                                          {DeviceKind::Cpu, 1}};
  const Placement plan = plan_placement(t, workers, 6);
  ASSERT_EQ(plan.workers.size(), workers.size());
  for (size_t i = 0; i < workers.size(); ++i) EXPECT_EQ(plan.workers[i].device, workers[i]);
  EXPECT_EQ(plan.workers[0].numa_node, 1);
  EXPECT_EQ(plan.workers[0].cpus, range(4, 4));
  EXPECT_EQ(plan.workers[1].numa_node, 0);
  // cuda:2's locality is unknown, so it takes the round-robin's first turn, then the CPU workers.
  EXPECT_EQ(plan.workers[2].numa_node, 0);
  EXPECT_THAT(plan.workers[2].reason, HasSubstr("GPU locality unknown"));
  EXPECT_EQ(plan.workers[3].numa_node, 1);
  EXPECT_EQ(plan.workers[4].numa_node, 0);
  EXPECT_FALSE(plan.single_node);
  // Threads alternate between the located GPUs' nodes (0 and 1), then move to the next core.
  ASSERT_EQ(plan.aggregator_threads.size(), 6u);
  const std::vector<std::string> expected = {"0", "4", "1", "5", "2", "6"};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(plan.aggregator_threads[i].to_string(), expected[i]) << "thread " << i;
}

TEST(Placement, AggregatorStaysNearTheGpusItServes) {
  const Topology t = two_node_machine();
  const Placement plan = plan_placement(t, {{DeviceKind::Cuda, 0}}, 0);
  EXPECT_EQ(plan.aggregator_threads.size(), 1u);  // 0: one per worker
  EXPECT_EQ(plan.aggregator_cpus(), range(4, 1));
  EXPECT_EQ(plan_placement(t, {{DeviceKind::Cuda, 0}}, 3).aggregator_cpus(), range(4, 3));
  // No GPU: every core serves (node 0's first, node 1's next).
  std::vector<DeviceRef> cpus;
  for (int i = 0; i < 4; ++i) cpus.push_back({DeviceKind::Cpu, i});
  const Placement cpu_plan = plan_placement(t, cpus, 0);
  EXPECT_EQ(cpu_plan.aggregator_threads.size(), 4u);
  EXPECT_EQ(cpu_plan.aggregator_cpus(), range(0, 2) | range(4, 2));
}

TEST(Placement, DefaultAggregatorLeavesACorePerWorkerAndKeepsOne) {
  const Topology t = two_node_machine();  // 8 cores, 4 per node
  std::vector<DeviceRef> cpus;
  for (int i = 0; i < 6; ++i) cpus.push_back({DeviceKind::Cpu, i});
  EXPECT_EQ(plan_placement(t, cpus, 0).aggregator_threads.size(), 2u);  // 8 cores - 6 workers
  for (int i = 6; i < 10; ++i) cpus.push_back({DeviceKind::Cpu, i});
  EXPECT_EQ(plan_placement(t, cpus, 0).aggregator_threads.size(), 1u);  // oversubscribed: one
}

TEST(Placement, TheLoaderTakesTheCoresNearTheGpusLeftAfterWorkersAndAggregator) {
  const Topology t = two_node_machine();
  // cuda:0 is on node 1 (4 cores): one goes to its worker, one to the aggregator, two decode, on
  // the cores but the aggregator's.
  Placement plan = plan_placement(t, {{DeviceKind::Cuda, 0}}, 0);
  EXPECT_EQ(plan.loader_threads, 2);
  EXPECT_EQ(plan.loader_cpus, range(5, 3));
  EXPECT_EQ(plan.loader_reason, "4 cores near the GPUs - 1 worker - 1 aggregator thread");
  // Aggregator threads asked for are taken out too; the loader keeps at least one thread, on the
  // aggregator's cores when those are all there are.
  EXPECT_EQ(plan_placement(t, {{DeviceKind::Cuda, 0}}, 2).loader_threads, 1);
  plan = plan_placement(t, {{DeviceKind::Cuda, 0}}, 4);
  EXPECT_EQ(plan.loader_threads, 1);
  EXPECT_EQ(plan.loader_cpus, range(4, 4));
  EXPECT_EQ(plan.loader_reason,
            "4 cores near the GPUs - 1 worker - 4 aggregator threads, at least 1, on the "
            "aggregator's cores (no other is near the GPUs)");
  // GPUs on both nodes: the loader spans both. CPU workers: every core serves, the aggregator's
  // too (their layers compute there anyway).
  plan = plan_placement(t, {{DeviceKind::Cuda, 0}, {DeviceKind::Cuda, 1}}, 0);
  EXPECT_EQ(plan.loader_threads, 4);
  EXPECT_EQ(plan.loader_cpus, range(1, 3) | range(5, 3));
  plan = plan_placement(t, {{DeviceKind::Cpu, 0}, {DeviceKind::Cpu, 1}}, 0);
  EXPECT_EQ(plan.loader_threads, 4);
  EXPECT_EQ(plan.loader_cpus, range(0, 8));
  EXPECT_EQ(plan.loader_reason, "8 cores - 2 workers - 2 aggregator threads");
  // Asked for: as asked, on the same cores.
  plan = plan_placement(t, {{DeviceKind::Cuda, 0}}, 0, 9);
  EXPECT_EQ(plan.loader_threads, 9);
  EXPECT_EQ(plan.loader_cpus, range(5, 3));
}

// A loader or issuing thread on a summing core stalled each chunk's OpenMP team on an H200 box
// (a 9 MB sum took 27 ms): with GPU workers the aggregator's cores are its own.
TEST(Placement, GpuWorkersIssueFromCoresTheAggregatorLeaves) {
  const Topology t = two_node_machine();
  const std::vector<DeviceRef> gpus = {{DeviceKind::Cuda, 0}, {DeviceKind::Cuda, 1}};
  Placement plan = plan_placement(t, gpus, 4);
  EXPECT_EQ(plan.aggregator_cpus(), range(0, 2) | range(4, 2));
  EXPECT_EQ(plan.workers[0].issue_cpus, range(6, 2));  // node 1 but its summing cores
  EXPECT_EQ(plan.workers[1].issue_cpus, range(2, 2));
  EXPECT_EQ(plan.loader_cpus, range(2, 2) | range(6, 2));
  // Without a host sum (ps0, local) nothing is kept apart.
  plan = plan_placement(t, gpus, 4, 0, /*host_sums=*/false);
  EXPECT_TRUE(plan.workers[0].issue_cpus.empty());
  EXPECT_EQ(plan.loader_cpus, range(0, 8));
  // A GPU whose node's cores all sum issues from the other cores near the GPUs.
  plan = plan_placement(t, gpus, 8);
  EXPECT_EQ(plan.aggregator_cpus(), range(0, 8));
  EXPECT_TRUE(plan.workers[0].issue_cpus.empty());  // nothing left: shares, as the loader does
  plan = plan_placement(t, {{DeviceKind::Cuda, 0}, {DeviceKind::Cpu, 0}}, 2);
  EXPECT_EQ(plan.aggregator_cpus(), range(4, 2));
  EXPECT_EQ(plan.workers[0].issue_cpus, range(6, 2));
  EXPECT_TRUE(plan.workers[1].issue_cpus.empty());  // a CPU worker computes on every core
}

TEST(Placement, IsDeterministicAndCoversEveryWorkerOnThisMachine) {
  const Topology t = Topology::discover();
  std::vector<DeviceRef> workers;
  for (int i = 0; i < 5; ++i) workers.push_back({DeviceKind::Cpu, i});
  const Placement a = plan_placement(t, workers, 3), b = plan_placement(t, workers, 3);
  ASSERT_EQ(a.workers.size(), workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    EXPECT_EQ(a.workers[i].device, workers[i]);
    EXPECT_EQ(a.workers[i].numa_node, b.workers[i].numa_node);
    EXPECT_EQ(a.workers[i].cpus, b.workers[i].cpus);
    EXPECT_FALSE(a.workers[i].cpus.empty());
    EXPECT_TRUE(t.node(a.workers[i].numa_node).cpus.includes(a.workers[i].cpus));
  }
  EXPECT_EQ(a.aggregator_threads, b.aggregator_threads);
  EXPECT_EQ(a.aggregator_threads.size(), 3u);
  EXPECT_TRUE(t.all_cpus().includes(a.aggregator_cpus()));
  EXPECT_EQ(a.single_node, t.numa_nodes.size() == 1);
}

TEST(Placement, RejectsNoWorkersAndAbsentGpus) {
  const Topology t = two_node_machine();
  EXPECT_THROW(plan_placement(t, {}, 1), UsageError);
  try {
    plan_placement(t, {{DeviceKind::Cuda, 5}}, 1);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda:5: no such GPU (3 found)"));
  }
}

TEST(Binding, ThreadBoundToTheFirstCoreReadsBackThatSet) {
  const CoreSet first_core = Topology::discover().cores.front().cpus;
  hwloc_topology_t topo;
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  BindStatus status;
  std::vector<int> read_back;
  // A thread of its own, so the test runner's main thread keeps its affinity.
  std::thread([&] {
    status = bind_current_thread(first_core);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) == 0) read_back = bitmap_cpus(set);
    hwloc_bitmap_free(set);
  }).join();
  hwloc_topology_destroy(topo);
  ASSERT_TRUE(status.bound) << status.note;
  EXPECT_EQ(read_back, first_core.cpus());
  EXPECT_FALSE(bind_current_thread(CoreSet()).bound);
}

TEST(Binding, MemoryOnNodeZeroIsWritableAndThere) {
  const size_t bytes = 1 << 20;
  const NodeAllocation a = alloc_on_node(bytes, 0);
  ASSERT_NE(a.ptr, nullptr);
  EXPECT_EQ(a.status.bound, a.status.note.empty());
  auto* p = static_cast<unsigned char*>(a.ptr);
  std::memset(p, 0x5a, bytes);
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[bytes - 1], 0x5a);
  if (a.status.bound) {
    hwloc_topology_t topo;
    ASSERT_EQ(hwloc_topology_init(&topo), 0);
    ASSERT_EQ(hwloc_topology_load(topo), 0);
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    ASSERT_EQ(hwloc_get_area_memlocation(topo, a.ptr, bytes, nodes, HWLOC_MEMBIND_BYNODESET), 0);
    EXPECT_EQ(bitmap_cpus(nodes), std::vector<int>{0});  // a nodeset: bit i is node i
    hwloc_bitmap_free(nodes);
    hwloc_topology_destroy(topo);
  }
  free_on_node(a.ptr, bytes);
  EXPECT_EQ(alloc_on_node(0, 0).ptr, nullptr);
}

TEST(Binding, UnknownNodeIsRejected) {
  try {
    (void)alloc_on_node(4096, 4095);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NUMA node 4095: no such node"));
  }
}

TEST(TopoCommand, ReportsNodesAndPlacement) {
  const Topology t = Topology::discover();
  const auto text = testing::run_command(cat(testing::binary_dir(), "/cgdp topo --cpu --devices 2 2>&1"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr(cat("NUMA nodes: ", t.numa_nodes.size(), ",")));
  EXPECT_THAT(text.output, HasSubstr("cpu:1 -> NUMA node"));
  if (t.numa_nodes.size() == 1)
    EXPECT_THAT(text.output, HasSubstr("single NUMA node: all workers and aggregator threads"));
  if (t.gpus.empty()) EXPECT_THAT(text.output, HasSubstr("no CUDA GPU found"));

  const auto json = testing::run_command(cat(testing::binary_dir(), "/cgdp topo --json 2>&1"));
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto d = nlohmann::json::parse(json.output);
  EXPECT_EQ(d["numa_nodes"].size(), t.numa_nodes.size());
  EXPECT_EQ(d["cores"], t.cores.size());
  EXPECT_EQ(d["gpus"].size(), t.gpus.size());
  EXPECT_EQ(d["placement"]["workers"].size(), std::max<size_t>(t.gpus.size(), 1));
  EXPECT_FALSE(d["placement"]["aggregator_threads"].empty());
  EXPECT_GE(d["placement"]["loader"]["threads"].get<int>(), 1);
}

// hwloc describing a two-node machine as if it were this one: the plan spreads CPU workers over
// both nodes, and binding memory to a node this machine lacks is refused and reported, not hidden.
TEST(TopoCommand, ReportsRefusedMemoryBindingOnADescribedTwoNodeMachine) {
  const Topology real = Topology::discover();
  const auto r = testing::run_command(
      cat("HWLOC_THISSYSTEM=1 HWLOC_SYNTHETIC='pack:2 [numa(memory=1GB)] core:2 pu:1' ",
          testing::binary_dir(), "/cgdp topo --cpu --devices 3 --aggregator-threads 4 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("NUMA nodes: 2, cores: 4, logical CPUs: 4"));
  EXPECT_THAT(r.output,
              HasSubstr("cpu:1 -> NUMA node 1, CPUs 2-3 (round-robin over 2 NUMA nodes)"));
  EXPECT_THAT(r.output, HasSubstr("one core each: CPUs 0 | 2 | 1 | 3"));
  // The default: one per worker, leaving a core per worker (4 - 3).
  const auto d = testing::run_command(
      cat("HWLOC_THISSYSTEM=1 HWLOC_SYNTHETIC='pack:2 [numa(memory=1GB)] core:2 pu:1' ",
          testing::binary_dir(), "/cgdp topo --cpu --devices 3 2>&1"));
  EXPECT_THAT(d.output, HasSubstr("placement for 3 workers and 1 aggregator thread:"));
  const bool has_node_1 = std::any_of(real.numa_nodes.begin(), real.numa_nodes.end(),
                                      [](const NumaNode& n) { return n.os_index == 1; });
  EXPECT_THAT(r.output, HasSubstr(has_node_1 ? "memory binding on node 1: works"
                                             : "memory binding on node 1: memory not bound to "
                                               "NUMA node 1 (the OS refused: "));
}

TEST(TopoCommand, TooManyGpuWorkersIsAUsageError) {
  const Topology t = Topology::discover();
  if (t.gpus.empty()) GTEST_SKIP() << "no CUDA GPU: without GPUs topo plans CPU workers";
  const auto r = testing::run_command(
      cat(testing::binary_dir(), "/cgdp topo --devices ", t.gpus.size() + 1, " 2>&1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("add --cpu to plan CPU workers"));
}

}  // namespace
}  // namespace cgdp
