// The CUDA backend of the device interface: cudaStream_t, cudaEvent_t, cudaMemcpyAsync,
// cudaLaunchHostFunc and pinned host memory behind the same Stream/Event/Device as the CPU
// backend, plus each stream's cuDNN/cuBLAS handles and scratch (cuda_libraries.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cuda_status.hpp"
#include "cgdp/device/device.hpp"
#include "cgdp/sync/topology.hpp"
#include "cuda_check.hpp"
#include "cuda_libraries.hpp"
#include "cuda_stream.hpp"

namespace cgdp {

namespace {

// Makes `index` current for the calling thread (CUDA's current device is per thread).
void use_device(int index) { CUDA_CHECK(cudaSetDevice(index)); }

// A stream's two scratch buffers (cuda_libraries.hpp).
enum class StreamScratch { kCudnn, kHalfOperands };

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(int device) {
    use_device(device);
    CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool query() override {
    const cudaError_t s = cudaEventQuery(event_);
    if (s == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is an answer, not an error to report at the next launch
      return false;
    }
    CUDA_CHECK(s);
    return true;
  }
  void synchronize() override { CUDA_CHECK(cudaEventSynchronize(event_)); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_{};
};

class CudaStream final : public Stream {
 public:
  CudaStream(Device& device, std::string name) : device_(device), name_(std::move(name)) {
    use_device(device_.index());
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    cudaSetDevice(device_.index());
    cudaStreamSynchronize(stream_);
    if (cublas_) cublas::library().destroy(cublas_);
    if (cudnn_) cudnnDestroy(cudnn_);
    workspace_.reset();
    half_operands_.reset();
    cudaStreamDestroy(stream_);
  }
  const std::string& name() const override { return name_; }
  // `work` runs now, on the calling thread, with this stream's device current; the kernels it
  // launches go to this stream (layers read it from RunContext).
  void submit(std::function<void()> work) override {
    use_device(device_.index());
    work();
  }
  void copy_async(void* dst, const void* src, size_t bytes) override {
    use_device(device_.index());
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }
  void zero_async(void* dst, size_t bytes) override {
    use_device(device_.index());
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
  }
  void record(Event& event) override {
    use_device(device_.index());
    CUDA_CHECK(cudaEventRecord(dynamic_cast<CudaEvent&>(event).get(), stream_));
  }
  void wait(Event& event) override {
    use_device(device_.index());
    CUDA_CHECK(cudaStreamWaitEvent(stream_, dynamic_cast<CudaEvent&>(event).get(), 0));
  }
  void launch_host_func(std::function<void()> fn) override {
    use_device(device_.index());
    auto* call = new HostCall{this, std::move(fn)};
    const cudaError_t s = cudaLaunchHostFunc(stream_, &CudaStream::trampoline, call);
    if (s != cudaSuccess) delete call;
    CUDA_CHECK(s);
  }
  // Also rethrows the first exception a host function on this stream threw (the stream stays
  // failed, as a CPU stream does; the GPU work queued after it still ran).
  void synchronize() override {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::lock_guard lock(error_mutex_);
    if (error_) std::rethrow_exception(error_);
  }
  cudaStream_t get() const { return stream_; }

  cudnnHandle_t cudnn() {
    std::lock_guard lock(libraries_mutex_);
    if (!cudnn_) {
      use_device(device_.index());
      CUDNN_CHECK(cudnnCreate(&cudnn_));
      CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    }
    return cudnn_;
  }
  cublasHandle_t cublas() {
    std::lock_guard lock(libraries_mutex_);
    if (!cublas_) {
      use_device(device_.index());
      const cublas::Library& lib = cublas::library();
      CUBLAS_CHECK(lib.create(&cublas_));
      CUBLAS_CHECK(lib.set_stream(cublas_, stream_));
      CUBLAS_CHECK(lib.set_math_mode(cublas_, CUBLAS_DEFAULT_MATH));
    }
    return cublas_;
  }
  void* scratch(StreamScratch which, size_t bytes) {
    std::lock_guard lock(libraries_mutex_);
    DeviceBuffer& buffer = which == StreamScratch::kCudnn ? workspace_ : half_operands_;
    if (buffer.bytes() < bytes) {
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      buffer.reset();
      buffer = DeviceBuffer(device_, bytes);
    }
    return buffer.get();
  }

 private:
  struct HostCall {
    CudaStream* stream;
    std::function<void()> fn;
  };
  // Runs on a CUDA runtime thread: must not call CUDA, and must not let an exception escape.
  static void CUDART_CB trampoline(void* data) {
    std::unique_ptr<HostCall> call(static_cast<HostCall*>(data));
    try {
      call->fn();
    } catch (...) {
      std::lock_guard lock(call->stream->error_mutex_);
      if (!call->stream->error_) call->stream->error_ = std::current_exception();
    }
  }

  Device& device_;
  std::string name_;
  cudaStream_t stream_{};
  // Two locks: workspace() waits for the stream while holding its own, and a host function
  // that fails must still be able to record its error meanwhile.
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::mutex libraries_mutex_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer half_operands_;
};

CudaStream& cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  if (!cuda) throw DeviceError(cat("stream '", stream.name(), "' is not a CUDA stream"));
  return *cuda;
}

class CudaDevice final : public Device {
 public:
  // `numa_node` >= 0: pinned host memory is bound to that node (the GPU's) and then registered
  // with CUDA; -1: cudaHostAlloc, placed wherever the OS puts the calling thread's pages.
  CudaDevice(int index, int numa_node) : index_(index), numa_node_(numa_node) {}
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  int index() const override { return index_; }
  std::string name() const override { return cat("cuda:", index_); }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CudaStream>(*this, name);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(index_); }
  // cudaMemset runs on the legacy default stream, which does not order with our non-blocking
  // streams: wait for it, so the zeros are there before any stream reads the memory.
  void* allocate(size_t bytes) override {
    use_device(index_);
    void* ptr = nullptr;
    CUDA_CHECK(cudaMalloc(&ptr, bytes));
    CUDA_CHECK(cudaMemset(ptr, 0, bytes));
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
    count_device_alloc(static_cast<int64_t>(bytes));
    return ptr;
  }
  void deallocate(void* ptr, size_t bytes) override {
    cudaSetDevice(index_);
    cudaFree(ptr);
    count_device_alloc(-static_cast<int64_t>(bytes));
  }
  void* allocate_pinned(size_t bytes) override;
  void deallocate_pinned(void* ptr, size_t bytes) override {
    cudaSetDevice(index_);
    if (numa_node_ < 0) {
      cudaFreeHost(ptr);
    } else {
      cudaHostUnregister(ptr);
      free_on_node(ptr, bytes);
    }
    count_pinned_alloc(-static_cast<int64_t>(bytes));
  }
  // Synchronous: device-to-device and pageable-host copies may return before they finish, so
  // wait for the legacy default stream they ran on.
  void copy(void* dst, const void* src, size_t bytes) override {
    use_device(index_);
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  std::string pinned_memory_note() const override {
    std::lock_guard lock(note_mutex_);
    return pinned_note_;
  }
  void bind_calling_thread() override { use_device(index_); }
  PeerAccess enable_peer_access(const Device& peer) override {
    if (peer.kind() != DeviceKind::Cuda || peer.index() == index_) return PeerAccess::NotApplicable;
    int possible = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, index_, peer.index()));
    if (!possible) return PeerAccess::Unsupported;
    use_device(index_);
    const cudaError_t s = cudaDeviceEnablePeerAccess(peer.index(), 0);
    if (s == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // a second worker on this GPU asked again: not an error
      return PeerAccess::Enabled;
    }
    CUDA_CHECK(s);
    return PeerAccess::Enabled;
  }

 private:
  int index_;
  int numa_node_;
  mutable std::mutex note_mutex_;
  std::string pinned_note_;
};

void* CudaDevice::allocate_pinned(size_t bytes) {
  use_device(index_);
  void* ptr = nullptr;
  if (numa_node_ < 0) {
    CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
    std::lock_guard lock(note_mutex_);
    pinned_note_ = "pinned host memory placed by the OS (the GPU's NUMA node is unknown)";
  } else {
    const NodeAllocation a = alloc_on_node(bytes, numa_node_);
    const cudaError_t s = cudaHostRegister(a.ptr, bytes, cudaHostRegisterPortable);
    if (s != cudaSuccess) free_on_node(a.ptr, bytes);
    CUDA_CHECK(s);
    ptr = a.ptr;
    std::lock_guard lock(note_mutex_);
    if (pinned_note_.empty() || !a.status.bound)
      pinned_note_ = a.status.bound ? cat("pinned host memory bound to NUMA node ", numa_node_)
                                    : cat("pinned host memory: ", a.status.note);
  }
  count_pinned_alloc(static_cast<int64_t>(bytes));
  return ptr;
}

}  // namespace

cudaStream_t native_stream(Stream& stream) { return cuda_stream(stream).get(); }
cudnnHandle_t cudnn_handle(Stream& stream) { return cuda_stream(stream).cudnn(); }
cublasHandle_t cublas_handle(Stream& stream) { return cuda_stream(stream).cublas(); }
void* stream_workspace(Stream& stream, size_t bytes) {
  return cuda_stream(stream).scratch(StreamScratch::kCudnn, bytes);
}
void* stream_half_operands(Stream& stream, size_t bytes) {
  return cuda_stream(stream).scratch(StreamScratch::kHalfOperands, bytes);
}

std::unique_ptr<Device> make_cuda_device(int index, int numa_node) {
  return std::make_unique<CudaDevice>(index, numa_node);
}

const CudaProbe& probe_cuda() {
  static const CudaProbe probe = [] {
    CudaProbe p;
    int n = 0;
    const cudaError_t error = cudaGetDeviceCount(&n);
    cudaGetLastError();  // no driver or no GPU: clear the error; the probe keeps it
    p.error = static_cast<int>(error);
    p.error_name = cudaGetErrorName(error);
    p.error_text = cudaGetErrorString(error);
    p.devices = error == cudaSuccess ? n : 0;
    cudaDriverGetVersion(&p.driver_version);
    cudaRuntimeGetVersion(&p.runtime_version);
    return p;
  }();
  return probe;
}

int count_cuda_devices() { return probe_cuda().devices; }

int64_t cuda_free_memory_bytes() {
  int64_t least = -1;
  for (int i = 0; i < count_cuda_devices(); ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    size_t free = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free, &total));
    least = least < 0 ? static_cast<int64_t>(free) : std::min(least, static_cast<int64_t>(free));
  }
  return std::max<int64_t>(least, 0);
}

}  // namespace cgdp
