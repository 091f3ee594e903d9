// Machine discovery through hwloc (NUMA nodes, cores, GPUs by PCI bus id) and the thread and
// memory binding calls built on it.
#include "cgdp/sync/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <memory>
#include <system_error>

#include "cgdp/core/error.hpp"

namespace cgdp {

#ifdef CGDP_HAVE_CUDA
std::vector<std::string> cuda_pci_bus_ids();  // src/cuda/cuda_topology.cpp
#else
static std::vector<std::string> cuda_pci_bus_ids() {
  return {};
}
#endif

CoreSet::CoreSet(std::vector<int> cpus) : cpus_(std::move(cpus)) {
  std::sort(cpus_.begin(), cpus_.end());
  cpus_.erase(std::unique(cpus_.begin(), cpus_.end()), cpus_.end());
}

bool CoreSet::contains(int cpu) const {
  return std::binary_search(cpus_.begin(), cpus_.end(), cpu);
}

bool CoreSet::includes(const CoreSet& other) const {
  return std::includes(cpus_.begin(), cpus_.end(), other.cpus_.begin(), other.cpus_.end());
}

CoreSet CoreSet::operator|(const CoreSet& other) const {
  std::vector<int> both = cpus_;
  both.insert(both.end(), other.cpus_.begin(), other.cpus_.end());
  return CoreSet(std::move(both));
}

CoreSet CoreSet::operator-(const CoreSet& other) const {
  std::vector<int> left;
  std::set_difference(cpus_.begin(), cpus_.end(), other.cpus_.begin(), other.cpus_.end(),
                      std::back_inserter(left));
  return CoreSet(std::move(left));
}

std::string CoreSet::to_string() const {
  if (cpus_.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < cpus_.size();) {
    size_t j = i;
    while (j + 1 < cpus_.size() && cpus_[j + 1] == cpus_[j] + 1) ++j;
    out += cat(out.empty() ? "" : ",", cpus_[i]);
    if (j > i) out += cat("-", cpus_[j]);
    i = j + 1;
  }
  return out;
}

CoreSet Topology::all_cpus() const {
  CoreSet all;
  for (const auto& node : numa_nodes) all = all | node.cpus;
  return all;
}

const NumaNode& Topology::node(int os_index) const {
  for (const auto& n : numa_nodes)
    if (n.os_index == os_index) return n;
  std::string known;
  for (const auto& n : numa_nodes) known += cat(known.empty() ? "" : ", ", n.os_index);
  throw DeviceError(cat("NUMA node ", os_index, ": no such node (this machine has ", known, ")"));
}

namespace {

struct BitmapFree {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

Bitmap new_bitmap() {
  Bitmap bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw DeviceError("hwloc: cannot allocate a bitmap");
  return bitmap;
}

Bitmap to_bitmap(const CoreSet& cpus) {
  Bitmap bitmap = new_bitmap();
  for (int cpu : cpus.cpus()) hwloc_bitmap_set(bitmap.get(), static_cast<unsigned>(cpu));
  return bitmap;
}

CoreSet to_core_set(hwloc_const_bitmap_t bitmap) {
  std::vector<int> cpus;
  if (bitmap == nullptr || hwloc_bitmap_iszero(bitmap)) return {};
  // An infinite set (hwloc's "all") cannot be listed; none of the sets used here is one.
  if (hwloc_bitmap_weight(bitmap) < 0) throw DeviceError("hwloc: unexpected infinite CPU set");
  for (int i = hwloc_bitmap_first(bitmap); i >= 0; i = hwloc_bitmap_next(bitmap, i))
    cpus.push_back(i);
  return CoreSet(std::move(cpus));
}

// Owns a loaded hwloc topology. With `with_io`, PCI devices are kept so GPUs can be located.
class HwlocTopology {
 public:
  explicit HwlocTopology(bool with_io) {
    if (hwloc_topology_init(&topology_) != 0)
      throw DeviceError(
          cat("hwloc: cannot initialise a topology: ", std::generic_category().message(errno)));
    if (with_io) hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topology_) != 0) {
      const int error = errno;
      hwloc_topology_destroy(topology_);
      throw DeviceError(cat("hwloc: cannot load this machine's topology: ",
                            std::generic_category().message(error)));
    }
  }
  ~HwlocTopology() { hwloc_topology_destroy(topology_); }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_{};
};

// Binding needs a loaded topology but no I/O devices; load it once per process. A loaded
// topology is only read afterwards, which hwloc allows from any number of threads.
hwloc_topology_t binding_topology() {
  static const HwlocTopology topology(/*with_io=*/false);
  return topology.get();
}

std::vector<NumaNode> discover_nodes(hwloc_topology_t topo) {
  std::vector<NumaNode> nodes;
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    nodes.push_back({static_cast<int>(obj->os_index), to_core_set(obj->cpuset), 0,
                     obj->attr->numanode.local_memory});
  }
  if (nodes.empty()) throw DeviceError("hwloc: found no NUMA node on this machine");
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });
  return nodes;
}

// Physical cores; where hwloc cannot tell cores apart (some VMs), each hardware thread is one.
std::vector<CpuCore> discover_cores(hwloc_topology_t topo, std::vector<NumaNode>& nodes) {
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  if (hwloc_get_nbobjs_by_type(topo, type) <= 0) type = HWLOC_OBJ_PU;
  std::vector<CpuCore> cores;
  const int n = hwloc_get_nbobjs_by_type(topo, type);
  for (int i = 0; i < n; ++i) {
    CoreSet cpus = to_core_set(hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(i))->cpuset);
    if (cpus.empty()) continue;
    auto home = std::find_if(nodes.begin(), nodes.end(),
                             [&](const NumaNode& node) { return node.cpus.includes(cpus); });
    if (home == nodes.end()) home = nodes.begin();  // a core no node claims: keep it usable
    ++home->cores;
    cores.push_back({home->os_index, std::move(cpus)});
  }
  std::sort(cores.begin(), cores.end(), [](const CpuCore& a, const CpuCore& b) {
    return a.cpus.cpus().front() < b.cpus.cpus().front();
  });
  return cores;
}

GpuLocality locate_gpu(hwloc_topology_t topo, int cuda_index, const std::string& bus_id) {
  GpuLocality gpu{cuda_index, bus_id, -1, {}};
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) return gpu;
  hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topo, domain, bus, dev, func);
  if (pci == nullptr) return gpu;
  hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (near == nullptr) return gpu;
  gpu.cpus = to_core_set(near->cpuset);
  if (near->nodeset != nullptr && !hwloc_bitmap_iszero(near->nodeset))
    gpu.numa_node = hwloc_bitmap_first(near->nodeset);
  return gpu;
}

// hwloc accepts, and ignores, binding to a topology that is not this machine's (HWLOC_XMLFILE or
// HWLOC_SYNTHETIC set); say so instead of reporting a binding that never happened.
const char* foreign_topology_note(hwloc_topology_t topo) {
  return hwloc_topology_is_thissystem(topo)
             ? nullptr
             : "not bound: hwloc describes another machine (HWLOC_XMLFILE or HWLOC_SYNTHETIC)";
}

// Page-aligned memory wherever the OS puts it, freed by free_on_node() like bound memory.
void* plain_alloc(hwloc_topology_t topo, size_t bytes) {
  void* ptr = hwloc_alloc(topo, bytes);
  if (ptr == nullptr) throw DeviceError(cat("host: out of memory allocating ", bytes, " bytes"));
  return ptr;
}

}  // namespace

Topology Topology::discover() {
  const HwlocTopology hwloc(/*with_io=*/true);
  Topology t;
  t.numa_nodes = discover_nodes(hwloc.get());
  t.cores = discover_cores(hwloc.get(), t.numa_nodes);
  t.pus = hwloc_get_nbobjs_by_type(hwloc.get(), HWLOC_OBJ_PU);
  const std::vector<std::string> bus_ids = cuda_pci_bus_ids();
  for (size_t i = 0; i < bus_ids.size(); ++i)
    t.gpus.push_back(locate_gpu(hwloc.get(), static_cast<int>(i), bus_ids[i]));
#ifdef CGDP_HAVE_CUDA
  if (t.gpus.empty()) t.gpu_note = "no CUDA GPU found";
#else
  t.gpu_note = "no CUDA GPU found (this cgdp was built without CUDA)";
#endif
  return t;
}

BindStatus bind_current_thread(const CoreSet& cpus) {
  if (cpus.empty()) return {false, "no CPUs to bind to"};
  if (const char* note = foreign_topology_note(binding_topology())) return {false, note};
  const Bitmap set = to_bitmap(cpus);
  if (hwloc_set_cpubind(binding_topology(), set.get(), HWLOC_CPUBIND_THREAD) != 0)
    return {false, cat("cannot bind a thread to CPUs ", cpus.to_string(), ": ",
                       std::generic_category().message(errno))};
  return {true, ""};
}

NodeAllocation alloc_on_node(size_t bytes, int node) {
  hwloc_topology_t topo = binding_topology();
  if (hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(node)) == nullptr)
    throw DeviceError(cat("NUMA node ", node, ": no such node; cannot allocate ", bytes, " bytes"));
  if (bytes == 0) return {nullptr, {true, ""}};
  if (const char* note = foreign_topology_note(topo))
    return {plain_alloc(topo, bytes), {false, note}};
  const Bitmap nodes = new_bitmap();
  hwloc_bitmap_only(nodes.get(), static_cast<unsigned>(node));
  // STRICT: fail rather than bind loosely; NOCPUBIND: never move the calling thread instead.
  const int flags = HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT | HWLOC_MEMBIND_NOCPUBIND;
  if (void* ptr = hwloc_alloc_membind(topo, bytes, nodes.get(), HWLOC_MEMBIND_BIND, flags))
    return {ptr, {true, ""}};
  const int error = errno;
  if (error == ENOMEM)
    throw DeviceError(cat("NUMA node ", node, ": out of memory allocating ", bytes, " bytes"));
  return {plain_alloc(topo, bytes),
          {false, cat("memory not bound to NUMA node ", node, " (the OS refused: ",
                      std::generic_category().message(error), "); using the default placement")}};
}

void free_on_node(void* ptr, size_t bytes) {
  if (ptr != nullptr) hwloc_free(binding_topology(), ptr, bytes);
}

}  // namespace cgdp
