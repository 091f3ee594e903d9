// Parameter-server shards and clients on loopback: byte-balanced layouts, bitwise fixed-order
// sums for 1-3 shards x 2-3 hosts, token checks, fuzzed frames, and shards that die or freeze.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "cgdp/shard/protocol.hpp"
#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_layout.hpp"
#include "cgdp/shard/shard_server.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using std::chrono::milliseconds;
const std::string kToken = "test-cluster-token-0123456789";

// Log lines of all shards of a test, readable while they run.
struct LogSink {
  std::mutex mutex;
  std::vector<std::string> lines;
  ShardLog sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  bool contains(const std::string& text) {
    std::lock_guard lock(mutex);
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
};

struct Cluster {
  Cluster(int shards, int hosts, std::vector<int64_t> chunks) : chunk_sizes(std::move(chunks)) {
    for (int s = 0; s < shards; ++s) {
      ShardConfig c;
      c.shard = s;
      c.num_shards = shards;
      c.num_hosts = hosts;
      c.chunk_sizes = chunk_sizes;
      c.token = kToken;
      c.sum_threads = 2;
      c.log = log.sink();
      servers.push_back(std::make_unique<ShardServer>(c));
      endpoints.push_back(servers.back()->endpoint());
    }
    num_hosts = hosts;
  }
  PsClientConfig client(int rank, milliseconds timeout = milliseconds(10000)) const {
    return PsClientConfig{endpoints, rank, num_hosts, chunk_sizes, kToken, timeout};
  }
  LogSink log;
  std::vector<int64_t> chunk_sizes;
  int num_hosts = 0;
  std::vector<std::unique_ptr<ShardServer>> servers;
  std::vector<std::string> endpoints;
};

// Host h's gradient element i at iteration t: small integers (exact sums) or arbitrary floats.
float value(bool integers, int h, int64_t t, int64_t i) {
  if (integers) return static_cast<float>((h * 7 + t * 3 + i) % 17 - 8);
  const uint64_t x = (static_cast<uint64_t>(h) * 1000003u + t * 7919u + i) * 0x9E3779B97F4A7C15ull;
  return static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) * 1.37e-5f;
}

// Every host pushes all chunks (in a random order) then pulls them in another random order,
// in place, for `iterations` iterations; returns each host's final flat vector.
std::vector<std::vector<float>> run_hosts(const Cluster& cluster, bool integers, int iterations) {
  const int hosts = cluster.num_hosts;
  int64_t total = 0;
  for (int64_t s : cluster.chunk_sizes) total += s;
  std::vector<std::vector<float>> results(hosts, std::vector<float>(total));
  std::vector<std::exception_ptr> errors(hosts);
  std::vector<std::thread> threads;
  for (int h = 0; h < hosts; ++h) {
    threads.emplace_back([&, h] {
      try {
        PsClient client(cluster.client(h));
        const ShardLayout& layout = client.layout();
        std::mt19937 rng(h + 17);
        std::vector<int> order(layout.num_chunks());
        std::iota(order.begin(), order.end(), 0);
        std::vector<float>& g = results[h];
        std::vector<int64_t> start(layout.num_chunks(), 0);
        for (int c = 1; c < layout.num_chunks(); ++c)
          start[c] = start[c - 1] + layout.chunk_sizes[c - 1];
        for (int t = 0; t < iterations; ++t) {
          for (int64_t i = 0; i < total; ++i) g[i] = value(integers, h, t, i);
          std::shuffle(order.begin(), order.end(), rng);
          for (int c : order) client.push(t, c, g.data() + start[c], layout.chunk_sizes[c]);
          std::shuffle(order.begin(), order.end(), rng);
          for (int c : order) client.pull(t, c, g.data() + start[c], layout.chunk_sizes[c]);
        }
      } catch (...) {
        errors[h] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

void expect_fixed_order_sum(const Cluster& cluster, bool integers, int iterations) {
  const auto results = run_hosts(cluster, integers, iterations);
  const int64_t total = static_cast<int64_t>(results[0].size());
  const int64_t t = iterations - 1;
  for (int64_t i = 0; i < total; ++i) {
    // Host 0, then 1, 2, ... in float. Through a volatile, so the compiler cannot fuse value()'s
    // multiplication into the addition (an FMA rounds once, the shards round twice).
    volatile float term = value(integers, 0, t, i);
    float expected = term;
    for (int h = 1; h < cluster.num_hosts; ++h) {
      term = value(integers, h, t, i);
      expected += term;
    }
    for (int h = 0; h < cluster.num_hosts; ++h)
      ASSERT_EQ(std::bit_cast<uint32_t>(results[h][i]), std::bit_cast<uint32_t>(expected))
          << "host " << h << " element " << i;
  }
}

TEST(ShardLayout, BalancesBytesAndSplitsLargeChunks) {
  const std::vector<int64_t> chunks = {5, 1000, 37, 4099, 1};
  for (int shards = 1; shards <= 4; ++shards) {
    const ShardLayout layout = assign_ranges(chunks, shards);
    ASSERT_EQ(layout.total, 5142);
    int64_t next = 0;
    for (const ShardPiece& p : layout.pieces) {
      EXPECT_EQ(p.offset, next);  // pieces tile the vector in order
      EXPECT_GT(p.count, 0);
      EXPECT_GE(p.offset, layout.shard_begin[p.shard]);
      EXPECT_LE(p.offset + p.count, layout.shard_begin[p.shard + 1]);
      next += p.count;
    }
    for (int c = 0; c < layout.num_chunks(); ++c) {
      int64_t covered = 0;
      for (const ShardPiece& p : layout.pieces_of_chunk(c)) {
        EXPECT_EQ(p.chunk, c);
        EXPECT_EQ(p.chunk_offset, covered);
        covered += p.count;
      }
      EXPECT_EQ(covered, chunks[c]);
    }
    for (int s = 0; s < shards; ++s) {
      const int64_t owned = layout.shard_begin[s + 1] - layout.shard_begin[s];
      EXPECT_LE(std::abs(owned - layout.total / shards), 16) << "shard " << s;
      for (const ShardPiece& p : layout.pieces_of_shard(s)) EXPECT_EQ(p.shard, s);
    }
  }
  // The 4099-element chunk spreads over shards 0..3 of 4.
  const ShardLayout four = assign_ranges(chunks, 4);
  EXPECT_EQ(four.pieces_of_chunk(3).size(), 4u);
  EXPECT_NE(four.fingerprint(), assign_ranges(chunks, 3).fingerprint());
}

TEST(ShardLayout, RejectsBadPlans) {
  EXPECT_THROW(assign_ranges(std::vector<int64_t>{10}, 0), UsageError);
  EXPECT_THROW(assign_ranges(std::vector<int64_t>{}, 2), UsageError);
  try {
    assign_ranges(std::vector<int64_t>{10, 0}, 2);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 1 has 0 elements"), std::string::npos);
  }
}

TEST(ClusterToken, FromFileOrEnvironmentWithClearErrors) {
  testing::TempDir dir;
  const auto file = (dir / "token").string();
  testing::write_bytes(file, kToken + "\n");
  ::chmod(file.c_str(), 0644);
  try {
    load_cluster_token(file);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("readable by others"), std::string::npos) << e.what();
  }
  ::chmod(file.c_str(), 0600);
  EXPECT_EQ(load_cluster_token(file), kToken);
  testing::write_bytes(file, "short\n");
  EXPECT_THROW(load_cluster_token(file), UsageError);
  EXPECT_THROW(load_cluster_token((dir / "missing").string()), IoError);
  ::setenv("CGDP_TEST_TOKEN", kToken.c_str(), 1);
  EXPECT_EQ(load_cluster_token("", "CGDP_TEST_TOKEN"), kToken);
  ::unsetenv("CGDP_TEST_TOKEN");
  try {
    load_cluster_token("", "CGDP_TEST_TOKEN");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--token-file"), std::string::npos) << e.what();
  }
}

TEST(ShardProtocol, ParseHeaderChecksEveryField) {
  MessageHeader h = make_header(MessageKind::kPush, 1, 2, 3, 4, 5), out;
  EXPECT_EQ(parse_header(&h, sizeof h, out), "");
  EXPECT_EQ(out.count, 5);
  EXPECT_NE(parse_header(&h, sizeof h - 1, out), "");
  MessageHeader bad = h;
  bad.magic ^= 1;
  EXPECT_NE(parse_header(&bad, sizeof bad, out).find("magic"), std::string::npos);
  bad = h;
  bad.version = 99;
  EXPECT_NE(parse_header(&bad, sizeof bad, out).find("version"), std::string::npos);
  bad = h;
  bad.kind = 0;
  EXPECT_NE(parse_header(&bad, sizeof bad, out).find("unknown"), std::string::npos);
}

TEST(ShardServer, FixedOrderSumsAreBitwiseForAnyShardAndHostCount) {
  // Chunks that straddle shard cuts, a tiny one, and one large enough to span all shards.
  const std::vector<int64_t> chunks = {5, 1000, 37, 40000, 3};
  for (int shards = 1; shards <= 3; ++shards)
    for (int hosts = 2; hosts <= 3; ++hosts) {
      SCOPED_TRACE(::testing::Message() << shards << " shards, " << hosts << " hosts");
      Cluster integers(shards, hosts, chunks);
      expect_fixed_order_sum(integers, true, 3);
      Cluster floats(shards, hosts, chunks);
      expect_fixed_order_sum(floats, false, 2);
    }
}

}  // namespace
}  // namespace cgdp
