// The CUDA backend behind the device interface; every case skips with one line when no GPU is
// present (CI has none), and runs on the lent GPU machine.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/devices.hpp"

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_libraries.hpp"
#endif

namespace cgdp {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
    device_ = make_device(DeviceKind::Cuda, 0);
  }
  std::unique_ptr<Device> device_;
};

TEST_F(CudaDeviceTest, AsyncRoundTripThroughPinnedMemoryKeepsBytes) {
  const size_t n = 1 << 20;
  PinnedHostBuffer host_in(*device_, n * sizeof(float)), host_out(*device_, n * sizeof(float));
  DeviceBuffer dev(*device_, n * sizeof(float));
  auto* in = static_cast<float*>(host_in.get());
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i) * 0.5f;
  auto h2d = device_->create_stream("h2d");
  auto d2h = device_->create_stream("d2h");
  auto copied = device_->create_event();
  h2d->copy_async(dev.get(), host_in.get(), n * sizeof(float));
  h2d->record(*copied);
  d2h->wait(*copied);
  d2h->copy_async(host_out.get(), dev.get(), n * sizeof(float));
  std::atomic<bool> called{false};
  d2h->launch_host_func([&] { called = true; });
  d2h->synchronize();
  EXPECT_TRUE(called);
  const auto* out = static_cast<const float*>(host_out.get());
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(out[i], in[i]) << "at " << i;
  EXPECT_EQ(device_->memory_stats().device_bytes, static_cast<int64_t>(n * sizeof(float)));
}

TEST_F(CudaDeviceTest, ZeroAsyncClearsInStreamOrder) {
  const size_t n = 4096;
  DeviceBuffer dev(*device_, n * sizeof(float));
  std::vector<float> ones(n, 1.0f), back(n, 7.0f);
  auto stream = device_->create_stream("s");
  device_->copy(dev.get(), ones.data(), n * sizeof(float));
  stream->zero_async(static_cast<float*>(dev.get()) + 16, (n - 32) * sizeof(float));
  stream->synchronize();
  device_->copy(back.data(), dev.get(), n * sizeof(float));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i < 16 || i >= n - 16 ? 1.0f : 0.0f) << i;
}

// As on the CPU backend: a host function that throws fails its stream; synchronize() rethrows,
// and keeps doing so.
TEST_F(CudaDeviceTest, ThrowingHostFunctionFailsTheStream) {
  auto stream = device_->create_stream("s");
  stream->launch_host_func([] { throw DataError("bad label 12"); });
  std::atomic<bool> later{false};
  stream->launch_host_func([&] { later = true; });
  EXPECT_THROW(stream->synchronize(), DataError);
  EXPECT_TRUE(later);
  EXPECT_THROW(stream->synchronize(), DataError);
}

TEST_F(CudaDeviceTest, PinnedMemoryOnTheGpusNumaNodeIsReported) {
  auto device = make_device(DeviceKind::Cuda, 0, 0);  // node 0 exists on every machine
  PinnedHostBuffer pinned(*device, 1 << 20);
  ASSERT_NE(pinned.get(), nullptr);
  static_cast<char*>(pinned.get())[12345] = 1;
  EXPECT_NE(device->pinned_memory_note().find("NUMA node 0"), std::string::npos)
      << device->pinned_memory_note();
}

TEST(CudaDevices, MissingGpuIsAClearError) {
  const int n = cuda_device_count();
  try {
    make_device(DeviceKind::Cuda, n);
    FAIL() << "expected an error for cuda:" << n;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cat("cuda:", n)), std::string::npos) << e.what();
  }
}

#ifdef CGDP_HAVE_CUDA
// The checks need no GPU: each names the call, the library's reason and file:line.
TEST(CudaChecks, NameTheCallTheReasonAndTheLine) {
  auto message = [](auto&& check) {
    try {
      check();
    } catch (const DeviceError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string cuda = message([] { CUDA_CHECK(cudaErrorMemoryAllocation); });
  EXPECT_NE(cuda.find("cudaErrorMemoryAllocation failed: out of memory"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("cuda_device_test.cpp:"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.rfind("cuda:", 0), 0u) << cuda;
  const std::string cudnn = message([] { CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM); });
  EXPECT_NE(cudnn.find("CUDNN_STATUS_BAD_PARAM failed: CUDNN_STATUS_BAD_PARAM"), std::string::npos) << cudnn;
  const std::string cublas = message([] { CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
  EXPECT_NE(cublas.find("CUBLAS_STATUS_INVALID_VALUE failed: "), std::string::npos) << cublas;
}
#endif

}  // namespace
}  // namespace cgdp
