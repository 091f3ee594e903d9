// An emulation of the CUDA runtime calls cgdp's host code makes, for tests on a machine without a
// GPU: CGDP_EMULATED_GPUS GPUs (default 2) of CGDP_EMULATED_GPU_MEMORY_MB each (default 4096),
// whose "device memory" is host memory the emulation keeps a map of. Each stream runs its work on
// a thread of its own (stream_thread.hpp; emulated_device.hpp says what that shows); the legacy
// default stream too, which, as CUDA's, does not wait for cgdp's non-blocking streams.
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
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../kernel_emulation/runtime_hooks.hpp"
#include "emulated_device.hpp"
#include "stream_thread.hpp"

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

// CGDP_EMULATED_STREAMS: "async" (the default), "lagging" or "inline" (stream_thread.hpp).
StreamMode stream_mode() {
  static const StreamMode mode = [] {
    const char* text = std::getenv("CGDP_EMULATED_STREAMS");
    if (!text || !*text || std::strcmp(text, "async") == 0) return StreamMode::async;
    if (std::strcmp(text, "lagging") == 0) return StreamMode::lagging;
    if (std::strcmp(text, "inline") == 0) return StreamMode::inline_work;
    std::fprintf(stderr, "CGDP_EMULATED_STREAMS=%s: expected async, lagging or inline\n", text);
    std::exit(2);
  }();
  return mode;
}

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
};

// Every allocation and registered host range, by start address; streams (with their threads) and
// events alive; each GPU's legacy default stream, made at its first use.
struct Registry {
  std::mutex mutex;
  std::map<const char*, Allocation> blocks;
  std::map<int, size_t> device_bytes;
  std::set<std::pair<int, int>> peers;  // (device, peer) with access enabled
  std::map<const void*, std::shared_ptr<StreamThread>> streams;
  std::set<const void*> events;
  std::map<int, std::shared_ptr<StreamThread>> legacy_streams;
};

// Never destroyed: a stream thread may still run while the process exits.
Registry& registry() {
  static Registry& r = *new Registry;
  return r;
}

// The thread running `stream`'s work (the null stream: `device`'s legacy default stream);
// registry's mutex held.
const std::shared_ptr<StreamThread>& thread_of(Registry& r, cudaStream_t stream, int device) {
  if (stream) return r.streams.at(stream);
  std::shared_ptr<StreamThread>& legacy = r.legacy_streams[device];
  if (!legacy) legacy = std::make_shared<StreamThread>(device, stream_mode());
  return legacy;
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

namespace {
// thread_of, taking the registry's mutex; the thread outlives the stream's destruction.
std::shared_ptr<StreamThread> stream_thread(cudaStream_t stream) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return thread_of(r, stream, device_of(stream));
}
}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  stream_thread(stream)->push(std::move(work));
}

void finish(cudaStream_t stream) {
  stream_thread(stream)->finish();
}

// Waits for every stream of every GPU, as the calls that synchronise the device do (cudaFree).
void finish_all() {
  std::vector<std::shared_ptr<StreamThread>> threads;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const auto& [handle, thread] : r.streams) threads.push_back(thread);
    for (const auto& [device, thread] : r.legacy_streams) threads.push_back(thread);
  }
  for (const auto& thread : threads) thread->finish();
}

}  // namespace cgdp_device_emulation

namespace emu = cgdp_device_emulation;

namespace {

struct Stream {
  int device;  // first: device_of reads it through the opaque handle
};
// Where it was last recorded (registry's mutex guards both): the work up to `position` of
// `stream`; none: complete, as an event never recorded is.
struct Event {
  int device;
  std::shared_ptr<emu::StreamThread> stream;
  uint64_t position = 0;
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

// Where a copy's side lies: inside one device allocation, or host memory, pinned (allocated or
// registered with the runtime) or pageable.
enum class Side { kDevice, kPinned, kPageable };

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
  *side = emu::find_block(r, ptr, bytes, &base) ? Side::kPinned : Side::kPageable;
  return cudaSuccess;
}

// Checks a copy's two sides against the direction it names (cudaMemcpyDefault: any).
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       const char* call, Side* to_side = nullptr, Side* from_side = nullptr) {
  Side to{}, from{};
  if (cudaError_t e = side_of(dst, bytes, &to, std::string(call) + ": dst"); e) return e;
  if (cudaError_t e = side_of(src, bytes, &from, std::string(call) + ": src"); e) return e;
  if (to_side) *to_side = to;
  if (from_side) *from_side = from;
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

void issue_and_wait(cudaStream_t stream, std::function<void()> work) {
  emu::enqueue(stream, std::move(work));
  emu::finish(stream);
}

// A checked copy on `stream`, as CUDA runs one with pageable host memory: from it, the bytes are
// taken at the call (staged), so the caller may reuse them at once; into it, the call returns
// once they landed. Pinned memory and device memory are read and written in stream order.
void issue_copy(void* dst, const void* src, size_t bytes, Side to, Side from, cudaStream_t stream) {
  if (from == Side::kPageable && to != Side::kPageable) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    emu::enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else if (to == Side::kPageable) {
    issue_and_wait(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  } else {
    emu::enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
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

// cudaFree and cudaFreeHost synchronise the device: no stream may still use the memory after.
cudaError_t cudaFree(void* ptr) {
  if (!ptr) return ok();
  emu::finish_all();
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
  emu::finish_all();
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
  emu::finish_all();
  if (!remove_block(ptr, false))
    return fail(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister: not a registered range");
  return ok();
}

// On the legacy default stream, which does not wait for non-blocking streams; the host waits.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpy"); e) return e;
  issue_and_wait(nullptr, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return ok();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemcpyAsync"); e) return e;
  Side to{}, from{};
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpyAsync", &to, &from); e) return e;
  issue_copy(dst, src, bytes, to, from, stream);
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
  const auto rows = [dst, dpitch, src, spitch, width, height] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char*>(dst) + row * dpitch,
                   static_cast<const char*>(src) + row * spitch, width);
  };
  if (from == Side::kPageable || to == Side::kPageable)  // cgdp copies pinned rows only
    issue_and_wait(stream, rows);
  else
    emu::enqueue(stream, rows);
  return ok();
}

// Of device memory, asynchronous to the host, on the legacy default stream (as CUDA's).
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (!emu::device_range(dst, bytes, emu::current, "cudaMemset"))
    return fail(cudaErrorInvalidValue, emu::last_problem);
  emu::enqueue(nullptr, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return ok();
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemsetAsync"); e) return e;
  if (!emu::device_range(dst, bytes, emu::device_of(stream), "cudaMemsetAsync"))
    return fail(cudaErrorInvalidValue, emu::last_problem);
  emu::enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return ok();
}

// Every stream is non-blocking (cgdp makes no other kind): none waits for the legacy one.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  auto* s = new Stream{emu::current};
  auto thread = std::make_shared<emu::StreamThread>(s->device, emu::stream_mode());
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  *stream = reinterpret_cast<cudaStream_t>(s);
  r.streams[*stream] = std::move(thread);
  return ok();
}

// The stream's work still runs, as on a GPU: its thread stops once that is done and the last
// event recorded on it is gone.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaStreamDestroy"); e) return e;
  std::shared_ptr<emu::StreamThread> thread;
  {
    emu::Registry& r = emu::registry();
    std::lock_guard lock(r.mutex);
    thread = std::move(r.streams.at(stream));
    r.streams.erase(stream);
  }
  delete reinterpret_cast<Stream*>(stream);
  return ok();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (check_stream(stream, "cudaStreamSynchronize")) return emu::last_error;
  emu::finish(stream);
  return ok();
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  if (cudaError_t e = check_stream(stream, "cudaLaunchHostFunc"); e) return e;
  emu::enqueue(stream, [fn, data] { fn(data); });
  return ok();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  auto* e = new Event{emu::current, nullptr, 0};
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
  auto* e = reinterpret_cast<Event*>(event);
  if (e->device != emu::device_of(stream))
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: event and stream on two GPUs");
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  e->stream = emu::thread_of(r, stream, e->device);
  e->position = e->stream->issued();
  return ok();
}

namespace {
// Where `event` was last recorded (none: complete).
std::pair<std::shared_ptr<emu::StreamThread>, uint64_t> recorded(cudaEvent_t event) {
  emu::Registry& r = emu::registry();
  std::lock_guard lock(r.mutex);
  const auto* e = reinterpret_cast<const Event*>(event);
  return {e->stream, e->position};
}
}  // namespace

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (check_event(event, "cudaEventQuery")) return emu::last_error;
  const auto [stream, position] = recorded(event);
  if (stream && !stream->reached(position)) {
    emu::last_error = cudaErrorNotReady;  // as the runtime does: cgdp's query clears it
    return cudaErrorNotReady;
  }
  return ok();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (check_event(event, "cudaEventSynchronize")) return emu::last_error;
  if (const auto [stream, position] = recorded(event); stream) stream->wait_for(position);
  return ok();
}

// The stream's later work waits for the work the event's last record covered.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (cudaError_t e = check_stream(stream, "cudaStreamWaitEvent"); e) return e;
  if (check_event(event, "cudaStreamWaitEvent")) return emu::last_error;
  const auto [recorded_on, position] = recorded(event);
  if (recorded_on && !recorded_on->reached(position))
    emu::enqueue(stream, [recorded_on, position] { recorded_on->wait_for(position); });
  return ok();
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
       },
       [](void* stream, std::function<void()> work) {
         emu::enqueue(static_cast<cudaStream_t>(stream), std::move(work));
       }});
  return true;
}();

}  // namespace
