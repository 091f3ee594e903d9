// CPU streams behave like GPU streams: ordered, concurrent with each other, errors never hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"

namespace cgdp {
namespace {

using namespace std::chrono_literals;

TEST(CpuStream, RunsWorkInSubmissionOrder) {
  CpuDevice device;
  auto stream = device.create_stream("compute");
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) stream->submit([&order, i] { order.push_back(i); });
  stream->synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(CpuStream, CopyOnOneStreamRunsWhileAnotherComputes) {
  CpuDevice device;
  auto compute = device.create_stream("compute");
  auto d2h = device.create_stream("d2h");
  std::atomic<bool> compute_running{false}, copy_done_during_compute{false}, release{false};
  compute->submit([&] {
    compute_running = true;
    while (!release) std::this_thread::sleep_for(1ms);
    compute_running = false;
  });
  std::vector<float> src(1024, 3.f), dst(1024, 0.f);
  // Under load the compute task may start late: wait for it (up to 10 s) so that the check
  // below tests overlap, not how soon a thread got scheduled.
  d2h->submit([&] {
    for (int ms = 0; ms < 10000 && !compute_running; ++ms) std::this_thread::sleep_for(1ms);
  });
  d2h->copy_async(dst.data(), src.data(), src.size() * sizeof(float));
  d2h->launch_host_func([&] { copy_done_during_compute = compute_running.load(); });
  d2h->synchronize();  // would deadlock if the copy waited behind the compute stream
  release = true;
  compute->synchronize();
  EXPECT_TRUE(copy_done_during_compute);
  EXPECT_EQ(dst[1023], 3.f);
}

TEST(CpuStream, WaitOnEventOrdersAcrossStreams) {
  CpuDevice device;
  auto producer = device.create_stream("producer");
  auto consumer = device.create_stream("consumer");
  auto ready = device.create_event();
  int value = 0, seen = -1;
  producer->submit([&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
  });
  producer->record(*ready);
  consumer->wait(*ready);
  consumer->submit([&] { seen = value; });
  consumer->synchronize();
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(ready->query());
}

TEST(CpuStream, WaitOnNeverRecordedEventDoesNotBlock) {
  CpuDevice device;
  auto stream = device.create_stream("s");
  auto event = device.create_event();
  bool ran = false;
  stream->wait(*event);
  stream->submit([&] { ran = true; });
  stream->synchronize();
  EXPECT_TRUE(ran);
}

TEST(CpuStream, ErrorSkipsLaterWorkAndReachesWaitersWithoutHanging) {
  CpuDevice device;
  auto failing = device.create_stream("failing");
  auto waiting = device.create_stream("waiting");
  auto event = device.create_event();
  bool later_ran = false, waiter_ran = false;
  failing->submit([] { throw DeviceError("cpu:0: injected copy failure"); });
  failing->submit([&] { later_ran = true; });
  failing->record(*event);
  waiting->wait(*event);
  waiting->submit([&] { waiter_ran = true; });
  EXPECT_THROW(failing->synchronize(), DeviceError);
  EXPECT_THROW(waiting->synchronize(), DeviceError);
  EXPECT_THROW(event->synchronize(), DeviceError);
  EXPECT_FALSE(later_ran);
  EXPECT_FALSE(waiter_ran);
}

TEST(CpuDevice, AccountsDeviceAndPinnedBytes) {
  CpuDevice device;
  {
    DeviceBuffer a(device, 1000);
    PinnedHostBuffer p(device, 300);
    DeviceBuffer b(device, 24);
    EXPECT_EQ(device.memory_stats().device_bytes, 1024);
    EXPECT_EQ(device.memory_stats().pinned_bytes, 300);
    DeviceBuffer moved = std::move(a);
    EXPECT_EQ(device.memory_stats().device_bytes, 1024);
  }
  EXPECT_EQ(device.memory_stats().device_bytes, 0);
  EXPECT_EQ(device.memory_stats().device_peak_bytes, 1024);
  EXPECT_EQ(device.memory_stats().pinned_bytes, 0);
}

}  // namespace
}  // namespace cgdp
