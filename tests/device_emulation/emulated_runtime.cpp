// An emulation of the CUDA runtime calls cgdp's host code makes, for tests on a machine without a
// GPU: CGDP_EMULATED_GPUS GPUs (default 2) of CGDP_EMULATED_GPU_MEMORY_MB each (default 4096),
// whose "device memory" is host memory the emulation keeps a map of. Every operation completes on
// the issuing thread when it is issued (emulated_device.hpp says what that can and cannot show).
// What it checks, as a GPU would fail: a copy's or memset's device side inside one allocation, the
// direction a copy names, streams and events alive and on the right GPU, frees of what was
// allocated, registered host ranges, the GPU's capacity. A failure returns CUDA's error code and
// records why (cudaGetErrorString adds it).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "../kernel_emulation/runtime_hooks.hpp"
#include "emulated_device.hpp"

namespace cgdp_device_emulation {

namespace {

constexpr int kDefaultGpus = 2;
constexpr size_t kDefaultMemoryMb = 4096;

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::atoi(text) : fallback;
}

int gpu_count() {
  static const int count = env_int("CGDP_EMULATED_GPUS", kDefaultGpus);
  return count;
}

size_t gpu_capacity() {
  static const size_t bytes =
      static_cast<size_t>(env_int("CGDP_EMULATED_GPU_MEMORY_MB", kDefaultMemoryMb)) << 20;
  return bytes;
}

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
};

// Every allocation and registered host range, by start address; streams and events alive.
struct Registry {
  std::mutex mutex;
  std::map<const char*, Allocation> blocks;
  std::map<int, size_t> device_bytes;
  std::set<std::pair<int, int>> peers;  // (device, peer) with access enabled
  std::set<const void*> streams, events;
};

Registry& registry() {
  static Registry r;
  return r;
}

thread_local int current = 0;
thread_local cudaError_t last_error = cudaSuccess;
thread_local std::string last_problem;

// The allocation holding [ptr, ptr + bytes), if one does (registry's mutex held).
const Allocation* find_block(Registry& r, const void* ptr, size_t bytes, const char** base) {
  const char* p = static_cast<const char*>(ptr);
  auto it = r.blocks.upper_bound(p);
  if (it == r.blocks.begin()) return nullptr;
  --it;
  if (p + bytes > it->first + it->second.bytes) return nullptr;
  *base = it->first;
  return &it->second;
}

// Whether device memory of GPU `owner` can be read from GPU `device` (its own, or a peer's).
bool reachable(Registry& r, int owner, int device) {
  return owner == device || r.peers.count({device, owner}) > 0;
}

}  // namespace

int current_device() {
  return current;
}

int device_of(cudaStream_t stream) {
  return stream ? *reinterpret_cast<const int*>(stream) : current;
}

const std::string& problem() {
  return last_problem;
}

bool report(const std::string& what) {
  last_problem = what;
  return false;
}

void clear_problem() {
  last_problem.clear();
}

bool device_range(const void* ptr, size_t bytes, int device, const std::string& what) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const char* base = nullptr;
  const Allocation* a = find_block(r, ptr, bytes, &base);
  if (!a || a->device < 0) {
    char where[64];
    std::snprintf(where, sizeof where, "%p", ptr);
    return report(what + ": " + std::to_string(bytes) + " bytes at " + where +
                  " are not inside one device allocation");
  }
  if (!reachable(r, a->device, device))
    return report(what + ": memory of cuda:" + std::to_string(a->device) +
                  " used on cuda:" + std::to_string(device) + " without peer access");
  return true;
}

}  // namespace cgdp_device_emulation

namespace emu = cgdp_device_emulation;

namespace {

struct Stream {
  int device;  // first: device_of reads it through the opaque handle
};
struct Event {
  int device;
};

cudaError_t fail(cudaError_t error, const std::string& why) {
  emu::report(why);
  emu::last_error = error;
  return error;
}

cudaError_t ok() {
  emu::last_problem.clear();
  return cudaSuccess;
}

bool valid_device(int device) {
  return device >= 0 && device < emu::gpu_count();
}

cudaError_t check_stream(cudaStream_t stream, const char* call) {
  if (!stream) return cudaSuccess;
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  if (!r.streams.count(stream))
    return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": no such stream");
  return cudaSuccess;
}

cudaError_t check_event(cudaEvent_t event, const char* call) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  if (!r.events.count(event))
    return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": no such event");
  return cudaSuccess;
}

// Where a copy's side lies: inside one device allocation, or host memory (pinned or not).
enum class Side { kDevice, kHost };

// The side `ptr` is on, after checking that a device side lies inside one allocation.
cudaError_t side_of(const void* ptr, size_t bytes, Side* side, const std::string& what) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  const char* base = nullptr;
  if (const emu::Allocation* a = emu::find_block(r, ptr, 1, &base); a && a->device >= 0) {
    *side = Side::kDevice;
    if (!emu::find_block(r, ptr, bytes, &base))
      return fail(cudaErrorInvalidValue, what + ": " + std::to_string(bytes) +
                                             " bytes run past the end of the device allocation");
    return cudaSuccess;
  }
  *side = Side::kHost;
  return cudaSuccess;
}

// Checks a copy's two sides against the direction it names (cudaMemcpyDefault: any).
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       const char* call) {
  Side to{}, from{};
  if (cudaError_t e = side_of(dst, bytes, &to, std::string(call) + ": dst"); e) return e;
  if (cudaError_t e = side_of(src, bytes, &from, std::string(call) + ": src"); e) return e;
  const bool device_to = to == Side::kDevice, device_from = from == Side::kDevice;
  const bool matches = kind == cudaMemcpyDefault ||
                       (kind == cudaMemcpyHostToDevice && device_to && !device_from) ||
                       (kind == cudaMemcpyDeviceToHost && !device_to && device_from) ||
                       (kind == cudaMemcpyDeviceToDevice && device_to && device_from) ||
                       (kind == cudaMemcpyHostToHost && !device_to && !device_from);
  if (!matches)
    return fail(cudaErrorInvalidValue,
                std::string(call) + ": the copy's kind (" + std::to_string(kind) +
                    ") does not match its pointers (dst on " + (device_to ? "device" : "host") +
                    ", src on " + (device_from ? "device" : "host") + ")");
  return cudaSuccess;
}

const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered:
      return "cudaErrorHostMemoryNotRegistered";
    default:
      return "cudaErrorUnknown";
  }
}

const char* error_text(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "peer access is already enabled";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
      return "pointer does not correspond to a registered memory region";
    default:
      return "unknown error";
  }
}

// Adds an allocation of `bytes` on `device` (-1: pinned host) at `ptr`.
void add_block(void* ptr, size_t bytes, int device) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  r.blocks[static_cast<const char*>(ptr)] = {bytes, device};
  if (device >= 0) r.device_bytes[device] += bytes;
}

// Removes the allocation starting at `ptr` made as `device` says (-1: pinned); false if none.
bool remove_block(void* ptr, bool device) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  auto it = r.blocks.find(static_cast<const char*>(ptr));
  if (it == r.blocks.end() || (it->second.device >= 0) != device) return false;
  if (device) r.device_bytes[it->second.device] -= it->second.bytes;
  r.blocks.erase(it);
  return true;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emu::gpu_count();
  return *count > 0 ? ok() : fail(cudaErrorNoDevice, "CGDP_EMULATED_GPUS is 0");
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, "cudaSetDevice: no cuda:" + std::to_string(device));
  emu::current = device;
  return ok();
}

cudaError_t cudaGetDevice(int* device) {
  *device = emu::current;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice,
                "cudaGetDeviceProperties: no cuda:" + std::to_string(device));
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "cgdp emulated GPU");
  prop->totalGlobalMem = emu::gpu_capacity();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->pciBusID = 0x10 + device;
  return ok();
}

cudaError_t cudaDeviceGetPCIBusId(char* id, int length, int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, "cudaDeviceGetPCIBusId: no cuda:" + std::to_string(device));
  std::snprintf(id, static_cast<size_t>(length), "0000:%02x:00.0", 0x10 + device);
  return ok();
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!valid_device(device) || !valid_device(peer))
    return fail(cudaErrorInvalidDevice, "cudaDeviceCanAccessPeer: no such device");
  *can = device != peer;
  return ok();
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (!valid_device(peer) || peer == emu::current)
    return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess: bad peer");
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  if (!r.peers.insert({emu::current, peer}).second)
    return fail(cudaErrorPeerAccessAlreadyEnabled, "cudaDeviceEnablePeerAccess: enabled before");
  return ok();
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::last_error;
  emu::last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  return emu::last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  return error_name(error);
}

// The runtime's text, and why the emulation refused the call when it did.
const char* cudaGetErrorString(cudaError_t error) {
  thread_local std::string text;
  text = error_text(error);
  if (error != cudaSuccess && !emu::last_problem.empty()) text += " (" + emu::last_problem + ")";
  return text.c_str();
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  const int device = emu::current;
  {
    emu::Registry& r = emu::registry();
    std::lock_guard lock(r.mutex);
    if (r.device_bytes[device] + bytes > emu::gpu_capacity())
      return fail(cudaErrorMemoryAllocation, "cudaMalloc: " + std::to_string(bytes) +
                                                 " bytes more than cuda:" + std::to_string(device) +
                                                 " has free");
  }
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) return fail(cudaErrorMemoryAllocation, "cudaMalloc: the host has no memory left");
  std::memset(p, 0xff, bytes);  // NaNs: what a kernel reads before anything wrote it shows
  add_block(p, bytes, device);
  *ptr = p;
  return ok();
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return ok();
  if (!remove_block(ptr, true))
    return fail(cudaErrorInvalidValue, "cudaFree: not the start of a device allocation");
  std::free(ptr);
  return ok();
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  *total = emu::gpu_capacity();
  *free = *total - r.device_bytes[emu::current];
  return ok();
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc: the host has no memory left");
  add_block(p, bytes, -1);
  *ptr = p;
  return ok();
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return ok();
  if (!remove_block(ptr, false))
    return fail(cudaErrorInvalidValue, "cudaFreeHost: not memory cudaHostAlloc returned");
  std::free(ptr);
  return ok();
}

cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned int flags) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  const char* base = nullptr;
  const char* p = static_cast<const char*>(ptr);
  auto next = r.blocks.lower_bound(p);
  if (emu::find_block(r, ptr, 1, &base) || (next != r.blocks.end() && next->first < p + bytes))
    return fail(cudaErrorHostMemoryAlreadyRegistered, "cudaHostRegister: overlaps a registration");
  r.blocks[p] = {bytes, -1};
  return ok();
}

cudaError_t cudaHostUnregister(void* ptr) {
  if (!remove_block(ptr, false))
    return fail(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister: not a registered range");
  return ok();
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpy"); e) return e;
  std::memmove(dst, src, bytes);
  return ok();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemcpyAsync"); e) return e;
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpyAsync"); e) return e;
  std::memmove(dst, src, bytes);
  return ok();
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (width > dpitch || width > spitch)
    return fail(cudaErrorInvalidValue, "cudaMemcpy2DAsync: width exceeds a pitch");
  if (cudaError_t e = check_stream(stream, "cudaMemcpy2DAsync"); e) return e;
  if (height == 0 || width == 0) return ok();
  const size_t dst_span = dpitch * (height - 1) + width, src_span = spitch * (height - 1) + width;
  Side to{}, from{};
  if (cudaError_t e = side_of(dst, dst_span, &to, "cudaMemcpy2DAsync: dst"); e) return e;
  if (cudaError_t e = side_of(src, src_span, &from, "cudaMemcpy2DAsync: src"); e) return e;
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<char*>(dst) + row * dpitch,
                 static_cast<const char*>(src) + row * spitch, width);
  return ok();
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (!emu::device_range(dst, bytes, emu::current, "cudaMemset"))
    return fail(cudaErrorInvalidValue, emu::last_problem);
  std::memset(dst, value, bytes);
  return ok();
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemsetAsync"); e) return e;
  if (!emu::device_range(dst, bytes, emu::device_of(stream), "cudaMemsetAsync"))
    return fail(cudaErrorInvalidValue, emu::last_problem);
  std::memset(dst, value, bytes);
  return ok();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  auto* s = new Stream{emu::current};
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  *stream = reinterpret_cast<cudaStream_t>(s);
  r.streams.insert(*stream);
  return ok();
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaStreamDestroy"); e) return e;
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  r.streams.erase(stream);
  delete reinterpret_cast<Stream*>(stream);
  return ok();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return check_stream(stream, "cudaStreamSynchronize") ? emu::last_error : ok();
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  if (cudaError_t e = check_stream(stream, "cudaLaunchHostFunc"); e) return e;
  fn(data);
  return ok();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  auto* e = new Event{emu::current};
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  *event = reinterpret_cast<cudaEvent_t>(e);
  r.events.insert(*event);
  return ok();
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = check_event(event, "cudaEventDestroy"); e) return e;
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  r.events.erase(event);
  delete reinterpret_cast<Event*>(event);
  return ok();
}

// CUDA refuses an event recorded on another GPU's stream.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = check_event(event, "cudaEventRecord"); e) return e;
  if (cudaError_t e = check_stream(stream, "cudaEventRecord"); e) return e;
  if (reinterpret_cast<Event*>(event)->device != emu::device_of(stream))
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: event and stream on two GPUs");
  return ok();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return check_event(event, "cudaEventQuery") ? emu::last_error : ok();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return check_event(event, "cudaEventSynchronize") ? emu::last_error : ok();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (cudaError_t e = check_stream(stream, "cudaStreamWaitEvent"); e) return e;
  return check_event(event, "cudaStreamWaitEvent") ? emu::last_error : ok();
}

}  // extern "C"

namespace {

// The kernels' own copies and memsets (kernel_emulation/runtime_hooks.hpp) go through the checks.
const bool kernels_hooked = [] {
  cgdp_emulation::set_runtime_hooks(
      {[](void* dst, const void* src, size_t bytes, int kind, void* stream) -> int {
         return cudaMemcpyAsync(dst, src, bytes, static_cast<cudaMemcpyKind>(kind),
                                static_cast<cudaStream_t>(stream));
       },
       [](void* dst, int value, size_t bytes, void* stream) -> int {
         return cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream));
       }});
  return true;
}();

}  // namespace
