// The CUDA backend behind the device interface; every case skips with one line when no GPU is
// present (CI has none), and runs on the lent GPU machine.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/devices.hpp"

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

TEST(CudaDevices, MissingGpuIsAClearError) {
  const int n = cuda_device_count();
  try {
    make_device(DeviceKind::Cuda, n);
    FAIL() << "expected an error for cuda:" << n;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cat("cuda:", n)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cgdp
