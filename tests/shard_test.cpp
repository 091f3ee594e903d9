// Parameter-server shards and clients on loopback: byte-balanced layouts, bitwise fixed-order
// sums for 1-3 shards x 2-3 hosts (and 5), the BSP window of one piece, token files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "cgdp/shard/protocol.hpp"
#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_layout.hpp"
#include "cgdp/shard/shard_server.hpp"
#include "shard/piece_state.hpp"
#include "support/shard_cluster.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using testing::Cluster;
using testing::expect_fixed_order_sum;
using testing::kToken;

// Pieces tile the vector in order, each chunk's pieces tile the chunk, each piece lies in its
// shard's range and under the cap; every shard holds its share to within `slack` elements.
void check_layout(const ShardLayout& layout, int64_t slack) {
  int64_t next = 0;
  for (const ShardPiece& p : layout.pieces) {
    EXPECT_EQ(p.offset, next);
    EXPECT_GT(p.count, 0);
    EXPECT_LE(p.count, layout.limits.max_piece);
    EXPECT_GE(p.offset, layout.shard_begin[p.shard]);
    EXPECT_LE(p.offset + p.count, layout.shard_begin[p.shard + 1]);
    next += p.count;
  }
  EXPECT_EQ(next, layout.total);
  for (int c = 0; c < layout.num_chunks(); ++c) {
    int64_t covered = 0;
    for (const ShardPiece& p : layout.pieces_of_chunk(c)) {
      EXPECT_EQ(p.chunk, c);
      EXPECT_EQ(p.chunk_offset, covered);
      covered += p.count;
    }
    EXPECT_EQ(covered, layout.chunk_sizes[c]);
  }
  for (int s = 0; s < layout.num_shards; ++s) {
    const int64_t owned = layout.shard_begin[s + 1] - layout.shard_begin[s];
    EXPECT_LE(std::abs(owned - layout.total / layout.num_shards), slack) << "shard " << s;
    for (const ShardPiece& p : layout.pieces_of_shard(s)) EXPECT_EQ(p.shard, s);
  }
}

TEST(ShardLayout, BalancesBytesAndSplitsOnlyLargeChunks) {
  const std::vector<int64_t> small = {5, 1000, 37, 4099, 1};
  const std::vector<int64_t> large = {5, 1000, 37, 400000, 1};
  const PieceLimits fine{100, 1};
  for (int shards = 1; shards <= 4; ++shards) {
    SCOPED_TRACE(::testing::Message() << shards << " shards");
    check_layout(assign_ranges(small, shards, fine), 16);
    check_layout(assign_ranges(small, shards), PieceLimits{}.min_split + 16);
    check_layout(assign_ranges(large, shards), PieceLimits{}.min_split + 16);
    // Under the default limits no small chunk is split: one piece each.
    EXPECT_EQ(assign_ranges(small, shards).pieces.size(), small.size());
  }
  EXPECT_EQ(assign_ranges(small, 2, fine).pieces_of_chunk(1).size(), 10u);  // capped at 100
  // The 400000-element chunk spreads over all four shards, in pieces of at most 1 MiB.
  const ShardLayout four = assign_ranges(large, 4);
  EXPECT_EQ(four.pieces_of_chunk(3).front().shard, 0);
  EXPECT_EQ(four.pieces_of_chunk(3).back().shard, 3);
  EXPECT_EQ(four.pieces_of_chunk(3).size(), 4u);
  EXPECT_EQ(assign_ranges(large, 1).pieces_of_chunk(3).size(), 2u);  // 400000 > 2^18: two pieces
  EXPECT_NE(four.fingerprint(), assign_ranges(large, 3).fingerprint());
  EXPECT_NE(assign_ranges(small, 2, fine).fingerprint(), assign_ranges(small, 2).fingerprint());
}

TEST(ShardLayout, RejectsBadPlans) {
  EXPECT_THROW(assign_ranges(std::vector<int64_t>{10}, 0), UsageError);
  EXPECT_THROW(assign_ranges(std::vector<int64_t>{}, 2), UsageError);
  EXPECT_THROW(assign_ranges(std::vector<int64_t>{10}, 2, PieceLimits{0, 1}), UsageError);
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
  std::filesystem::create_directories(dir / "folder");  // 0755: was told to chmod 600 a directory
  try {
    load_cluster_token((dir / "folder").string());
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("folder is not a regular file (a directory?): --token-file "
                                   "names the file that holds the token"),
        std::string::npos)
        << e.what();
  }
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

zmq::message_t floats(std::vector<float> v) {
  return zmq::message_t(v.data(), v.size() * 4);
}

std::vector<float> floats_of(const zmq::message_t& m) {
  std::vector<float> v(m.size() / 4);
  std::memcpy(v.data(), m.data(), m.size());
  return v;
}

TEST(PieceState, SumsInHostOrderOnceAndKeepsAtMostTwoIterationsOpen) {
  PieceState piece(2, 2, 1);
  EXPECT_EQ(piece.push(0, 1, floats({1e8f, 1})), "");
  EXPECT_FALSE(piece.take_sum());  // host 0 has not pushed yet
  EXPECT_NE(piece.push(0, 1, floats({0, 0})).find("already pushed"), std::string::npos);
  EXPECT_EQ(piece.push(1, 1, floats({5, 6})), "");  // a fast host's next iteration
  EXPECT_NE(piece.push(2, 1, floats({0, 0})).find("more than one ahead"), std::string::npos);
  EXPECT_EQ(piece.push(0, 0, floats({-1e8f, 2})), "");
  auto ready = piece.take_sum();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->iteration, 0);
  EXPECT_EQ(floats_of(ready->sum), (std::vector<float>{0, 3}));  // host 0 first: (-1e8 + 1e8) + 1
  EXPECT_FALSE(piece.take_sum());                                // handed out once
  EXPECT_NE(piece.push(0, 0, floats({0, 0})).find("already done"), std::string::npos);
  EXPECT_NE(piece.push(3, 0, floats({0, 0})).find("out of step"), std::string::npos);
  EXPECT_EQ(piece.push(2, 1, floats({0, 0})), "");  // iteration 0 is done: 1 and 2 may be open
  EXPECT_EQ(piece.push(1, 0, floats({1, 1})), "");
  ready = piece.take_sum();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->iteration, 1);
  EXPECT_EQ(floats_of(ready->sum), (std::vector<float>{6, 7}));
  EXPECT_EQ(piece.sums_done(), 2);
}

// A skipped iteration never completes: once a later one is summed, the older one is closed.
TEST(PieceState, ALaterSumClosesAnOlderOpenIteration) {
  PieceState piece(2, 1, 1);
  EXPECT_EQ(piece.push(4, 0, floats({1})), "");
  EXPECT_EQ(piece.push(5, 0, floats({2})), "");
  EXPECT_EQ(piece.push(5, 1, floats({3})), "");  // host 1 skipped iteration 4
  ASSERT_TRUE(piece.take_sum());
  EXPECT_NE(piece.push(4, 1, floats({0})).find("already done"), std::string::npos);
  EXPECT_EQ(piece.push(6, 1, floats({0})), "");
}

// A gathered piece (sufficient factors across hosts) takes its owner's push only and hands it out
// as it came.
TEST(PieceState, AGatheredPieceTakesItsOwnersPushAlone) {
  PieceState piece(3, 2, 1, 1);
  EXPECT_EQ(piece.push(0, 0, floats({1, 2})), "host 0 pushed rows that only host 1 gathers");
  EXPECT_FALSE(piece.take_sum());
  EXPECT_EQ(piece.push(0, 1, floats({0.1f, -3})), "");
  auto ready = piece.take_sum();
  ASSERT_TRUE(ready);
  EXPECT_EQ(floats_of(ready->sum), (std::vector<float>{0.1f, -3}));
  EXPECT_NE(piece.push(0, 1, floats({0, 0})).find("already done"), std::string::npos);
}

// Three hosts on two shards: a summed chunk, and two chunks gathered from hosts 0 and 2 (one cut
// across both shards). Every host gets the sum and the other hosts' rows bit for bit; its own
// come back empty and are never sent to it; a host that pushes another's rows is refused.
TEST(PsClient, AGatheredChunkGoesFromItsOwnerToEveryOtherHostUnsummed) {
  const std::vector<int64_t> sizes = {100, 5000, 7};
  Cluster cluster(2, 3, sizes, PieceLimits{1000, 1}, {kSummed, 0, 2});
  std::vector<std::vector<std::vector<float>>> got(3);  // [host][chunk]
  std::vector<std::thread> hosts;
  for (int h = 0; h < 3; ++h)
    hosts.emplace_back([&, h] {
      PsClient client(cluster.client(h));
      std::vector<std::vector<float>> mine(3);
      for (int c = 0; c < 3; ++c) {
        mine[c].resize(static_cast<size_t>(sizes[c]));
        for (int64_t i = 0; i < sizes[c]; ++i) mine[c][i] = testing::value(c == 0, h, c, i);
      }
      for (int t = 0; t < 2; ++t) {
        for (int c = 0; c < 3; ++c)
          if (c == 0 || cluster.chunk_owners[c] == h) client.push(t, c, mine[c].data(), sizes[c]);
        got[h].assign(3, {});
        for (int c = 0; c < 3; ++c) {
          const PulledChunk pulled = client.pull(t, c);
          if (cluster.chunk_owners[c] == h) {
            EXPECT_TRUE(pulled.pieces().empty());
            continue;
          }
          got[h][c].resize(static_cast<size_t>(sizes[c]));
          pulled.copy_to(got[h][c].data());
        }
      }
      if (h == 1) EXPECT_THROW(client.push(2, 1, mine[1].data(), sizes[1]), UsageError);
    });
  for (auto& t : hosts) t.join();
  for (int h = 0; h < 3; ++h) {
    for (int64_t i = 0; i < sizes[0]; ++i)
      ASSERT_EQ(got[h][0][i], testing::value(true, 0, 0, i) + testing::value(true, 1, 0, i) +
                                  testing::value(true, 2, 0, i));  // small integers: exact
    for (int c = 1; c < 3; ++c) {
      const int owner = cluster.chunk_owners[c];
      if (owner == h) continue;
      for (int64_t i = 0; i < sizes[c]; ++i)
        ASSERT_EQ(got[h][c][i], testing::value(false, owner, c, i)) << h << " " << c << " " << i;
    }
  }
  int64_t sent = 0, pieces = 0;
  for (const auto& server : cluster.servers) {
    sent += server->stats().sums_sent;
    pieces += server->stats().pieces_summed;
  }
  const ShardLayout layout = assign_ranges(sizes, 2, cluster.limits, cluster.chunk_owners);
  const int64_t summed_pieces = static_cast<int64_t>(layout.pieces_of_chunk(0).size());
  const std::vector<int> all_summed(3, kSummed);
  EXPECT_NE(layout.fingerprint(), assign_ranges(sizes, 2, cluster.limits).fingerprint());
  EXPECT_EQ(assign_ranges(sizes, 2, cluster.limits, all_summed).fingerprint(),
            assign_ranges(sizes, 2, cluster.limits).fingerprint());
  EXPECT_THROW(assign_ranges(sizes, 2, cluster.limits, std::vector<int>{0, 1}), UsageError);
  EXPECT_EQ(pieces, 2 * static_cast<int64_t>(layout.pieces.size()));
  EXPECT_EQ(sent, 2 * (3 * summed_pieces +
                       2 * (static_cast<int64_t>(layout.pieces.size()) - summed_pieces)));
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
      Cluster small_pieces(shards, hosts, chunks, PieceLimits{1000, 1});  // 40+ pieces
      expect_fixed_order_sum(small_pieces, false, 2);
    }
  // Five hosts: sum_buffers' tree order ((h0 + h1) + (h2 + h3)) + h4 is not left to right.
  Cluster five(2, 5, chunks, PieceLimits{1000, 1});
  expect_fixed_order_sum(five, false, 2);
}

// Sums come in unasked, so one that comes while a pull waits for another chunk is kept for later;
// a host that keeps pushing without pulling is told so instead of hoarding sums.
TEST(PsClient, EarlySumsWaitForTheirPullAndUnpulledOnesAreAnError) {
  Cluster cluster(1, 1, {6});
  // Before the client: after a pull that throws, its pushes' floats must outlive it (ZeroMQ may
  // still be sending them, zero-copy; ps_client.hpp).
  std::vector<std::vector<float>> g(6, std::vector<float>(6));
  PsClient client(cluster.client(0));
  for (int t = 0; t < 2; ++t) {
    std::fill(g[t].begin(), g[t].end(), static_cast<float>(t + 1));
    client.push(t, 0, g[t].data(), 6);
  }
  const PulledChunk second = client.pull(1, 0);  // iteration 0's sum came first and is kept
  ASSERT_EQ(second.pieces().size(), 1u);
  EXPECT_EQ(second.pieces()[0].data[5], 2.f);
  std::vector<float> first(6);
  client.pull(0, 0, first.data(), 6);
  EXPECT_EQ(first, std::vector<float>(6, 1.f));
  for (int t = 2; t < 6; ++t) client.push(t, 0, g[t].data(), 6);
  try {
    client.pull(5, 0);  // two iterations may wait (2 and 3); a third (4) may not
    ADD_FAILURE() << "no NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("2 sums wait to be pulled (shard 0 ("), std::string::npos)
        << e.what();
  }
}

// A push the shard rejects fails the host's next pull with the shard's reason, at once.
TEST(PsClient, ARejectedPushFailsThePullWithTheReason) {
  Cluster cluster(1, 2, {6});
  PsClient client(cluster.client(0, std::chrono::seconds(60)));
  std::vector<float> g(6, 1.f);
  client.push(0, 0, g.data(), 6);
  client.push(0, 0, g.data(), 6);
  try {
    client.pull(0, 0);
    ADD_FAILURE() << "no NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("rejected a message of host 0 (while pulling iteration "
                                         "0, chunk 0): host 0 already pushed iteration 0"),
              std::string::npos)
        << e.what();
  }
}

// push() on one thread and pull() on another, as an aggregator may split them: each host's
// pusher sends every chunk of an iteration while its puller already waits for the sums.
TEST(PsClient, PushAndPullMayRunOnTwoThreads) {
  Cluster cluster(2, 2, {70000, 123, 50000}, PieceLimits{4096, 1024});
  const int64_t total = 120123;
  std::vector<std::vector<float>> sums(2, std::vector<float>(total));
  std::vector<std::thread> hosts;
  for (int h = 0; h < 2; ++h)
    hosts.emplace_back([&, h] {
      PsClient client(cluster.client(h));
      std::vector<float>& g = sums[h];
      for (int t = 0; t < 3; ++t) {
        for (int64_t i = 0; i < total; ++i) g[i] = testing::value(true, h, t, i);
        std::thread pusher([&] {
          for (int c = 0, at = 0; c < 3; at += cluster.chunk_sizes[c++])
            client.push(t, c, g.data() + at, cluster.chunk_sizes[c]);
        });
        for (int c = 0, at = 0; c < 3; at += cluster.chunk_sizes[c++])
          client.pull(t, c, g.data() + at, cluster.chunk_sizes[c]);
        pusher.join();
      }
    });
  for (auto& t : hosts) t.join();
  for (int64_t i = 0; i < total; ++i) {
    const float expected = testing::value(true, 0, 2, i) + testing::value(true, 1, 2, i);
    ASSERT_EQ(sums[0][i], expected) << i;
    ASSERT_EQ(sums[1][i], expected) << i;
  }
}

}  // namespace
}  // namespace cgdp
