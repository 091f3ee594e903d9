// Peer access for the classic scheme: asked both ways per pair, and the start line says which
// pairs copy directly and which go through the host. The GPUs are fakes that answer as CUDA would.
#include "cgdp/sync/peer_access.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "cgdp/core/error.hpp"

namespace cgdp {
namespace {

// A GPU that can reach the GPUs in `reachable` directly, and records which peers it was asked for.
class FakeGpu final : public Device {
 public:
  FakeGpu(int index, std::set<int> reachable) : index_(index), reachable_(std::move(reachable)) {}
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  int index() const override { return index_; }
  std::string name() const override { return cat("cuda:", index_); }
  std::unique_ptr<Stream> create_stream(const std::string&) override { return nullptr; }
  std::unique_ptr<Event> create_event() override { return nullptr; }
  void* allocate(size_t bytes) override { return std::calloc(1, bytes); }
  void deallocate(void* p, size_t) override { std::free(p); }
  void* allocate_pinned(size_t bytes) override { return std::calloc(1, bytes); }
  void deallocate_pinned(void* p, size_t) override { std::free(p); }
  void copy(void*, const void*, size_t) override {}
  PeerAccess enable_peer_access(const Device& peer) override {
    asked.insert(peer.index());
    if (peer.index() == index_) return PeerAccess::NotApplicable;
    return reachable_.count(peer.index()) ? PeerAccess::Enabled : PeerAccess::Unsupported;
  }
  std::set<int> asked;

 private:
  int index_;
  std::set<int> reachable_;
};

TEST(PeerAccess, BothDirectionsAreEnabledAndReported) {
  // 0-1 and 2-3 on one switch each; 0 and 2 only through the host.
  FakeGpu g0(0, {1}), g1(1, {0}), g2(2, {3}), g3(3, {2});
  const std::string line = enable_peer_access({{&g0, &g1}, {&g2, &g3}, {&g0, &g2}});
  EXPECT_EQ(line,
            "ps0: peer access on for cuda:0<->cuda:1, cuda:2<->cuda:3; no peer access for "
            "cuda:0<->cuda:2 (their copies go through host memory)");
  EXPECT_EQ(g0.asked, (std::set<int>{1, 2}));
  EXPECT_EQ(g1.asked, (std::set<int>{0}));
  EXPECT_EQ(g2.asked, (std::set<int>{0, 3}));
}

TEST(PeerAccess, OneWayOnlyCountsAsThroughTheHost) {
  FakeGpu g0(0, {1}), g1(1, {});
  EXPECT_EQ(enable_peer_access({{&g0, &g1}}),
            "ps0: no peer access for cuda:0<->cuda:1 (their copies go through host memory)");
}

TEST(PeerAccess, WorkersSharingOneGpuOrTheCpuBackendSayNothing) {
  FakeGpu a(0, {}), b(0, {});
  EXPECT_EQ(enable_peer_access({{&a, &b}}), "");
  EXPECT_EQ(enable_peer_access({}), "");
}

}  // namespace
}  // namespace cgdp
