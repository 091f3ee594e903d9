// A loopback cluster of parameter-server shards for tests: shards in this process with their log
// lines captured, hosts as threads running push/pull iterations, and the fixed-order check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_server.hpp"

namespace cgdp::testing {

inline const std::string kToken = "test-cluster-token-0123456789";

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
  // The last `n` lines, one per line, for a failure's message.
  std::string tail(size_t n) {
    std::lock_guard lock(mutex);
    std::string text;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
      text += lines[i] + "\n";
    return text;
  }
  bool contains(const std::string& text) {
    std::lock_guard lock(mutex);
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
};

struct Cluster {
  Cluster(int shards, int hosts, std::vector<int64_t> chunks, PieceLimits piece_limits = {},
          std::vector<int> owners = {})
      : chunk_sizes(std::move(chunks)), chunk_owners(std::move(owners)), limits(piece_limits) {
    for (int s = 0; s < shards; ++s) {
      ShardConfig c;
      c.shard = s;
      c.num_shards = shards;
      c.num_hosts = hosts;
      c.chunk_sizes = chunk_sizes;
      c.chunk_owners = chunk_owners;
      c.limits = limits;
      c.token = kToken;
      c.sum_threads = 2;
      c.log = log.sink();
      servers.push_back(std::make_unique<ShardServer>(c));
      endpoints.push_back(servers.back()->endpoint());
    }
    num_hosts = hosts;
  }
  PsClientConfig client(int rank,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    return PsClientConfig{endpoints, rank,    num_hosts, chunk_sizes,
                          kToken,    timeout, limits,    chunk_owners};
  }
  LogSink log;
  std::vector<int64_t> chunk_sizes;
  std::vector<int> chunk_owners;  // empty: every chunk summed
  PieceLimits limits;
  int num_hosts = 0;
  std::vector<std::unique_ptr<ShardServer>> servers;
  std::vector<std::string> endpoints;
};

// Host h's gradient element i at iteration t: small integers (exact sums) or arbitrary floats.
inline float value(bool integers, int h, int64_t t, int64_t i) {
  if (integers) return static_cast<float>((h * 7 + t * 3 + i) % 17 - 8);
  const uint64_t x = (static_cast<uint64_t>(h) * 1000003u + t * 7919u + i) * 0x9E3779B97F4A7C15ull;
  return static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) * 1.37e-5f;
}

// Every host pushes all chunks (in a random order) then pulls them in another random order,
// in place, for `iterations` iterations; returns each host's final flat vector.
inline std::vector<std::vector<float>> run_hosts(const Cluster& cluster, bool integers,
                                                 int iterations) {
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

// The sum of `terms` in sum_buffers' order over hosts 0..H-1: pairs at stride 1, 2, 4, ...
inline float tree_sum(std::vector<float> terms) {
  for (size_t stride = 1; stride < terms.size(); stride *= 2)
    for (size_t i = 0; i + stride < terms.size(); i += 2 * stride) terms[i] += terms[i + stride];
  return terms[0];
}

inline void expect_fixed_order_sum(const Cluster& cluster, bool integers, int iterations) {
  const auto results = run_hosts(cluster, integers, iterations);
  const int64_t total = static_cast<int64_t>(results[0].size());
  const int64_t t = iterations - 1;
  std::vector<float> terms(cluster.num_hosts);
  for (int64_t i = 0; i < total; ++i) {
    // Through a volatile, so the compiler cannot fuse value()'s multiplication into the
    // addition (an FMA rounds once, the shards round twice).
    for (int h = 0; h < cluster.num_hosts; ++h) {
      volatile float term = value(integers, h, t, i);
      terms[h] = term;
    }
    const float expected = tree_sum(terms);
    for (int h = 0; h < cluster.num_hosts; ++h)
      ASSERT_EQ(std::bit_cast<uint32_t>(results[h][i]), std::bit_cast<uint32_t>(expected))
          << "host " << h << " element " << i;
  }
}

}  // namespace cgdp::testing
