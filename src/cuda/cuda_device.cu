// The CUDA backend of the device interface: cudaStream_t, cudaEvent_t, cudaMemcpyAsync,
// cudaLaunchHostFunc and cudaHostAlloc behind the same Stream/Event/Device as the CPU backend.
#include <cuda_runtime.h>

#include <memory>

#include "cgdp/device/device.hpp"
#include "cuda_check.hpp"
#include "cuda_stream.hpp"

namespace cgdp {

namespace {

// Makes `index` current for the calling thread (CUDA's current device is per thread).
void use_device(int index) { CUDA_CHECK(cudaSetDevice(index)); }

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(int device) : device_(device) {
    use_device(device);
    CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool query() override {
    const cudaError_t s = cudaEventQuery(event_);
    if (s == cudaErrorNotReady) return false;
    CUDA_CHECK(s);
    return true;
  }
  void synchronize() override { CUDA_CHECK(cudaEventSynchronize(event_)); }
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_{};
};

class CudaStream final : public Stream {
 public:
  CudaStream(int device, std::string name) : device_(device), name_(std::move(name)) {
    use_device(device);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  const std::string& name() const override { return name_; }
  // Kernels launched by `work` go to this stream (layers read it from RunContext).
  void submit(std::function<void()> work) override {
    use_device(device_);
    work();
  }
  void copy_async(void* dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }
  void record(Event& event) override {
    CUDA_CHECK(cudaEventRecord(dynamic_cast<CudaEvent&>(event).get(), stream_));
  }
  void wait(Event& event) override {
    CUDA_CHECK(cudaStreamWaitEvent(stream_, dynamic_cast<CudaEvent&>(event).get(), 0));
  }
  void launch_host_func(std::function<void()> fn) override {
    auto* heap = new std::function<void()>(std::move(fn));
    const cudaError_t s = cudaLaunchHostFunc(stream_, &CudaStream::trampoline, heap);
    if (s != cudaSuccess) delete heap;
    CUDA_CHECK(s);
  }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  cudaStream_t get() const { return stream_; }

 private:
  static void CUDART_CB trampoline(void* data) {
    std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(data));
    (*fn)();  // must not call CUDA: the host-func contract
  }
  int device_;
  std::string name_;
  cudaStream_t stream_{};
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : index_(index) {}
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  int index() const override { return index_; }
  std::string name() const override { return cat("cuda:", index_); }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CudaStream>(index_, name);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(index_); }
  void* allocate(size_t bytes) override {
    use_device(index_);
    void* ptr = nullptr;
    CUDA_CHECK(cudaMalloc(&ptr, bytes));
    CUDA_CHECK(cudaMemset(ptr, 0, bytes));
    count_device_alloc(static_cast<int64_t>(bytes));
    return ptr;
  }
  void deallocate(void* ptr, size_t bytes) override {
    use_device(index_);
    cudaFree(ptr);
    count_device_alloc(-static_cast<int64_t>(bytes));
  }
  void* allocate_pinned(size_t bytes) override {
    use_device(index_);
    void* ptr = nullptr;
    CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
    count_pinned_alloc(static_cast<int64_t>(bytes));
    return ptr;
  }
  void deallocate_pinned(void* ptr, size_t bytes) override {
    cudaFreeHost(ptr);
    count_pinned_alloc(-static_cast<int64_t>(bytes));
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    use_device(index_);
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }

 private:
  int index_;
};

}  // namespace

cudaStream_t native_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  if (!cuda) throw DeviceError(cat("stream '", stream.name(), "' is not a CUDA stream"));
  return cuda->get();
}

std::unique_ptr<Device> make_cuda_device(int index) { return std::make_unique<CudaDevice>(index); }

int count_cuda_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: clear the sticky error, report none
    return 0;
  }
  return n;
}

}  // namespace cgdp
