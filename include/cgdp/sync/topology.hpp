// The host's NUMA nodes, cores and GPU locality (from hwloc), where cgdp places workers and
// aggregator threads, and the calls that bind threads and memory accordingly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/device/devices.hpp"

namespace cgdp {

// A set of logical CPUs by their OS numbers (as taskset and /proc/cpuinfo number them), sorted
// and without duplicates. A core with two hardware threads is two CPUs.
class CoreSet {
 public:
  CoreSet() = default;
  explicit CoreSet(std::vector<int> cpus);

  const std::vector<int>& cpus() const { return cpus_; }
  bool empty() const { return cpus_.empty(); }
  size_t size() const { return cpus_.size(); }
  bool contains(int cpu) const;
  bool includes(const CoreSet& other) const;
  CoreSet operator|(const CoreSet& other) const;
  CoreSet operator-(const CoreSet& other) const;  // these CPUs but those of `other`
  bool operator==(const CoreSet&) const = default;

  // "0-3,8,10-11"; "none" when empty.
  std::string to_string() const;

 private:
  std::vector<int> cpus_;
};

struct NumaNode {
  int os_index = 0;           // the kernel's node number: what alloc_on_node() takes
  CoreSet cpus;               // the CPUs whose local memory this is
  int cores = 0;              // physical cores among them
  uint64_t memory_bytes = 0;  // local memory
};

struct CpuCore {
  int numa_node = 0;  // os_index of the node holding it
  CoreSet cpus;       // its hardware threads
};

struct GpuLocality {
  int cuda_index = 0;
  std::string pci_bus_id;  // "0000:65:00.0", from the CUDA runtime
  int numa_node = -1;      // -1: hwloc did not find the PCI device, locality unknown
  CoreSet cpus;            // the CPUs closest to the GPU; empty when unknown
};

// A snapshot of the machine. Plain data, so a test can describe a machine it does not have.
struct Topology {
  std::vector<NumaNode> numa_nodes;  // ordered by os_index; at least one
  std::vector<CpuCore> cores;        // ordered by their first CPU
  int pus = 0;                       // logical CPUs (hardware threads) usable by this process
  std::vector<GpuLocality> gpus;     // one per CUDA device, by CUDA index; empty without GPUs
  std::string gpu_note;              // why `gpus` is empty ("no CUDA GPU found", ...)

  // Loads hwloc's view of this machine, including PCI devices to locate the GPUs.
  static Topology discover();

  CoreSet all_cpus() const;
  // Throws DeviceError naming the node and the nodes there are when `os_index` is not one.
  const NumaNode& node(int os_index) const;
};

struct WorkerPlacement {
  DeviceRef device;
  int numa_node = 0;   // where the worker's host buffers go and its host threads run
  CoreSet cpus;        // the CPUs near the GPU, or the node's CPUs for a CPU worker
  std::string reason;  // why this node, for the report
  // Where its issuing thread runs: a GPU worker's CPUs but the aggregator's; empty (unbound) for
  // a CPU worker, whose layers' threads may use every core.
  CoreSet issue_cpus;
};

struct Placement {
  std::vector<WorkerPlacement> workers;     // one per worker, in the order given
  std::vector<CoreSet> aggregator_threads;  // thread t runs on the CPUs of one core
  bool single_node = false;
  // The data loader's decode threads and the CPUs they may run on (the GPUs' nodes).
  int loader_threads = 1;
  CoreSet loader_cpus;
  std::string loader_reason;  // how the count was reached, for the report

  CoreSet aggregator_cpus() const;  // the union of aggregator_threads
};

// Places each worker on a NUMA node (a GPU's own node; CPU workers, and GPUs whose locality is
// unknown, round-robin over the nodes) and each aggregator thread on one core near the GPUs it
// serves (all cores when no GPU is located), spreading threads over those nodes. Deterministic.
// `aggregator_threads` 0: one per worker, at most the candidate cores left after one per worker,
// at least one. The loader's threads run on the same candidate cores; `loader_threads` 0 gives it
// the cores left after one per worker (its issuing or compute thread) and the aggregator's, and at
// least one. With GPU workers and `host_sums` (cgdp's aggregator sums) the aggregator's cores are
// its own: the loader and the issuing threads run on the others, where any are left. Throws
// UsageError for no workers and DeviceError for a CUDA worker the topology has no GPU for.
Placement plan_placement(const Topology& topology, const std::vector<DeviceRef>& workers,
                         int aggregator_threads, int loader_threads = 0, bool host_sums = true);

// Whether a binding took effect; when not, `note` says why (e.g. the OS refuses memory binding
// in this container), so the caller can say so once instead of running unbound silently.
struct BindStatus {
  bool bound = false;
  std::string note;
};

// Binds the calling thread to `cpus` (hwloc_set_cpubind, HWLOC_CPUBIND_THREAD).
[[nodiscard]] BindStatus bind_current_thread(const CoreSet& cpus);

struct NodeAllocation {
  void* ptr = nullptr;
  BindStatus status;  // not bound: page-aligned memory with the OS's default placement
};

// `bytes` of page-aligned memory bound to NUMA node `node` (an os_index), or, if the OS refuses
// to bind, unbound memory with the reason in `status`. Throws DeviceError for an unknown node or
// when no memory is left. Release with free_on_node(ptr, bytes).
[[nodiscard]] NodeAllocation alloc_on_node(size_t bytes, int node);
void free_on_node(void* ptr, size_t bytes);

}  // namespace cgdp
