// The emulated GPU refuses what a real one would fail on, with a message that says why; its
// streams run beside each other and order only through events; its cuBLAS multiplies as a
// float64 reference does. (Its cuDNN is checked by every CUDA layer test
// against the CPU layers.)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cublas_library.hpp"
#include "lag_scheduler.hpp"
#include "stream_thread.hpp"

namespace {

std::string error_text(cudaError_t e) {
  return cudaGetErrorString(e);
}

// A device allocation of n floats on the current GPU, freed at the end of the scope.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) : n(n) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(float)), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(ptr); }
  float* get() const { return static_cast<float*>(ptr); }
  void* ptr = nullptr;
  size_t n;
};

TEST(EmulatedCudaRuntime, RefusesACopyRunningPastItsAllocation) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceFloats d(16);
  std::vector<float> host(17, 1.0f);
  EXPECT_EQ(
      cudaMemcpyAsync(d.get(), host.data(), 16 * sizeof(float), cudaMemcpyHostToDevice, nullptr),
      cudaSuccess);
  const cudaError_t e = cudaMemcpyAsync(d.get() + 1, host.data(), 16 * sizeof(float),
                                        cudaMemcpyHostToDevice, nullptr);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(error_text(e).find("run past the end of the device allocation"), std::string::npos)
      << error_text(e);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, then cleared
}

TEST(EmulatedCudaRuntime, RefusesACopyWhoseKindContradictsItsPointers) {
  DeviceFloats d(4);
  std::vector<float> host(4);
  const cudaError_t e = cudaMemcpy(host.data(), d.get(), 4 * sizeof(float), cudaMemcpyHostToDevice);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(error_text(e).find("dst on host, src on device"), std::string::npos) << error_text(e);
  EXPECT_EQ(cudaMemcpy(host.data(), d.get(), 4 * sizeof(float), cudaMemcpyDefault), cudaSuccess);
}

TEST(EmulatedCudaRuntime, NewDeviceMemoryReadsAsNaN) {
  DeviceFloats d(8);
  std::vector<float> host(8, 0.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), d.get(), 8 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (float v : host) EXPECT_TRUE(std::isnan(v));
}

TEST(EmulatedCudaRuntime, RefusesFreesOfWhatItDidNotAllocate) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice
  float on_stack = 0;
  EXPECT_EQ(cudaFreeHost(&on_stack), cudaErrorInvalidValue);
}

TEST(EmulatedCudaRuntime, HoldsEachGpuToItsCapacity) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(free, total);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, total + 1);
  EXPECT_EQ(e, cudaErrorMemoryAllocation);
  EXPECT_NE(error_text(e).find("more than cuda:1 has free"), std::string::npos) << error_text(e);
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(free, total - (1 << 20));
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(EmulatedCudaRuntime, RefusesDestroyedStreamsAndEventsOnAnotherGpu) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t s0 = nullptr, s1 = nullptr;
  cudaEvent_t e0 = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(s1, e0, 0), cudaSuccess);  // waits may cross GPUs
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s1), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e0, s0), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s0), cudaSuccess);
}

// Column-major C = A^T B (A stored k x m) against sums in double.
// Two streams: one held back by a host function, then uploading; the other downloading. Without
// an event wait the download reads the new memory's NaNs (the upload has not run), and the
// event is not ready; after waiting on it, the download waits too and reads the upload.
TEST(EmulatedCudaStreams, RunBesideEachOtherAndInOrderOnlyThroughEvents) {
  if (const char* mode = std::getenv("CGDP_EMULATED_STREAMS"); mode && !std::strcmp(mode, "inline"))
    GTEST_SKIP() << "CGDP_EMULATED_STREAMS=inline: every stream runs on the issuing thread";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t up = nullptr, down = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t uploaded = nullptr, downloaded = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&downloaded, cudaEventDisableTiming), cudaSuccess);
  DeviceFloats d(4);
  float* pinned = nullptr;  // [0, 4): what goes up; [4, 8): what comes down
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 8 * sizeof(float), 0), cudaSuccess);
  for (int i = 0; i < 8; ++i) pinned[i] = i < 4 ? static_cast<float>(i + 1) : 0.0f;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const cudaHostFn_t hold = [](void* f) { static_cast<std::shared_future<void>*>(f)->wait(); };
  ASSERT_EQ(cudaLaunchHostFunc(up, hold, &released), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), pinned, 16, cudaMemcpyHostToDevice, up), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(uploaded, up), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(uploaded), cudaErrorNotReady);
  cudaGetLastError();
  ASSERT_EQ(cudaMemcpyAsync(pinned + 4, d.get(), 16, cudaMemcpyDeviceToHost, down), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(down), cudaSuccess);
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(pinned[i])) << i;
  ASSERT_EQ(cudaStreamWaitEvent(down, uploaded, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned + 4, d.get(), 16, cudaMemcpyDeviceToHost, down), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(downloaded, down), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(downloaded), cudaErrorNotReady);
  cudaGetLastError();
  release.set_value();
  ASSERT_EQ(cudaStreamSynchronize(down), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(uploaded), cudaSuccess);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(pinned[i], static_cast<float>(i - 3)) << i;
  cudaEventDestroy(uploaded);
  cudaEventDestroy(downloaded);
  cudaStreamDestroy(up);
  cudaStreamDestroy(down);
  cudaFreeHost(pinned);
}

// CGDP_EMULATED_STREAMS=lagging's two rules, on two streams of its own.
TEST(LaggingStreams, RunOnlyWhenWaitedForOrTheHostIsIdleLastPushedFirst) {
  namespace emu = cgdp_device_emulation;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> order;
  const auto note = [&](char name) {
    return [&, name] {
      std::lock_guard lock(mutex);
      order.push_back(name);
      changed.notify_all();
    };
  };
  // Long enough that a test thread the machine holds up does not look like an idle host.
  emu::lag_scheduler::set_idle_ns(200'000'000);
  emu::StreamThread producer(0, emu::StreamMode::lagging), consumer(0, emu::StreamMode::lagging);
  // Waited for: the producer's first piece runs, and only that.
  const uint64_t first = producer.push(note('p'));
  producer.push(note('q'));
  producer.wait_for(first);
  EXPECT_TRUE(producer.reached(first));
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(order, std::vector<char>{'p'});
  }
  // Not waited for: once the host is idle, the stream pushed to last runs first, then the other.
  consumer.push(note('c'));
  std::unique_lock lock(mutex);
  changed.wait(lock, [&] { return order.size() == 3; });
  EXPECT_EQ(order, (std::vector<char>{'p', 'c', 'q'}));
  emu::lag_scheduler::set_idle_ns(1'000'000);
}

TEST(EmulatedCublas, MultipliesAsAFloat64Reference) {
  const cgdp::cublas::Library& lib = cgdp::cublas::library();
  ASSERT_EQ(&lib, cgdp::cublas::linked_library()) << "the toolkit's cuBLAS was opened";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int m = 5, n = 3, k = 7;
  std::vector<float> a(k * m), b(k * n), c(m * n, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.7f * i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.3f * i);
  DeviceFloats da(a.size()), db(b.size()), dc(c.size());
  cudaMemcpy(da.get(), a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db.get(), b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(lib.create(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  ASSERT_EQ(lib.sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da.get(), k, db.get(), k, &zero,
                      dc.get(), m),
            CUBLAS_STATUS_SUCCESS);  // beta 0: C's NaNs are not read
  cudaMemcpy(c.data(), dc.get(), c.size() * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < k; ++p) want += double(a[i * k + p]) * b[j * k + p];
      EXPECT_NEAR(c[j * m + i], want, 1e-6 * (1 + std::fabs(want))) << i << "," << j;
    }
  lib.destroy(h);
}

TEST(EmulatedCublas, RefusesOperandsOutsideTheHandlesGpu) {
  const cgdp::cublas::Library& lib = cgdp::cublas::library();
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  DeviceFloats on_gpu1(16);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceFloats a(16), c(16);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(lib.create(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  EXPECT_EQ(lib.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.get(), 4, on_gpu1.get(), 4,
                      &zero, c.get(), 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(std::string(lib.status_string(CUBLAS_STATUS_INVALID_VALUE))
                .find("memory of cuda:1 used on cuda:0 without peer access"),
            std::string::npos);
  EXPECT_EQ(lib.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.get(), 4, a.get(), 4, &zero,
                      c.get() + 1, 4),
            CUBLAS_STATUS_INVALID_VALUE);  // C's 16 floats from the second of 16
  EXPECT_NE(
      std::string(lib.status_string(CUBLAS_STATUS_INVALID_VALUE)).find("cublasSgemm: C: 64 bytes"),
      std::string::npos)
      << lib.status_string(CUBLAS_STATUS_INVALID_VALUE);
  lib.destroy(h);
}

TEST(EmulatedCublas, MultipliesBf16OperandsIntoFp32) {
  const cgdp::cublas::Library& lib = cgdp::cublas::library();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<__nv_bfloat16> a(4), b(4);
  const float av[4] = {1.5f, -2.0f, 0.25f, 3.0f}, bv[4] = {2.0f, 0.5f, -1.0f, 4.0f};
  for (int i = 0; i < 4; ++i) a[i] = __float2bfloat16_rn(av[i]), b[i] = __float2bfloat16_rn(bv[i]);
  void *da = nullptr, *db = nullptr;
  DeviceFloats dc(4);
  cudaMalloc(&da, 8);
  cudaMalloc(&db, 8);
  cudaMemcpy(da, a.data(), 8, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), 8, cudaMemcpyHostToDevice);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(lib.create(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  ASSERT_EQ(
      lib.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, da, CUDA_R_16BF, 2, db, CUDA_R_16BF,
                  2, &zero, dc.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  float c[4];
  cudaMemcpy(c, dc.get(), 16, cudaMemcpyDeviceToHost);
  // Column-major 2x2: C = A B with A = [1.5 0.25; -2 3], B = [2 -1; 0.5 4].
  EXPECT_FLOAT_EQ(c[0], 1.5f * 2 + 0.25f * 0.5f);
  EXPECT_FLOAT_EQ(c[1], -2.0f * 2 + 3.0f * 0.5f);
  EXPECT_FLOAT_EQ(c[2], 1.5f * -1 + 0.25f * 4);
  EXPECT_FLOAT_EQ(c[3], -2.0f * -1 + 3.0f * 4);
  EXPECT_EQ(
      lib.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, da, CUDA_R_16BF, 2, db, CUDA_R_16F, 2,
                  &zero, dc.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);
  lib.destroy(h);
  cudaFree(da);
  cudaFree(db);
}

}  // namespace
