// The order in which samples are visited: one permutation per epoch derived from (seed, epoch),
// a position that checkpoints save and restore exactly, and the slice of a global batch that
// one worker takes.
#pragma once

#include <cstdint>
#include <vector>

namespace cgdp {

enum class Order { Shuffled, Sequential };

// Where the next sample comes from: `offset` into epoch `epoch`'s permutation.
struct SamplerPosition {
  int64_t epoch = 0;
  int64_t offset = 0;
  bool operator==(const SamplerPosition&) const = default;
};

// Epoch `epoch`'s order of 0..size-1: a Fisher–Yates shuffle driven by std::mt19937_64 with
// unbiased bounded draws done here (std::uniform_int_distribution differs between standard
// libraries), so the same (size, seed, epoch) gives the same permutation everywhere.
std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch);

class Sampler {
 public:
  // Throws DataError for an empty dataset and UsageError for a position outside it.
  Sampler(int64_t dataset_size, Order order, uint64_t seed, SamplerPosition start = {});

  // Appends the next `count` sample indices to `out`, continuing into the following epochs'
  // permutations when an epoch runs out.
  void take(int64_t count, std::vector<int64_t>& out);
  SamplerPosition position() const { return position_; }
  int64_t remaining_in_epoch() const { return size_ - position_.offset; }
  // Samples drawn before the current position: epoch * size + offset.
  int64_t samples_drawn() const { return position_.epoch * size_ + position_.offset; }

 private:
  void enter_epoch(int64_t epoch);

  int64_t size_;
  Order order_;
  uint64_t seed_;
  SamplerPosition position_;
  std::vector<int64_t> order_of_epoch_;  // permutation of position_.epoch (empty if Sequential)
};

// The rows [begin, begin + size) of a global batch that one worker computes on.
struct BatchSlice {
  int64_t begin = 0;
  int64_t size = 0;
};

// Worker `worker` of `workers`, each with `per_worker_batch` samples, takes the rows
// [worker * b, (worker + 1) * b) of a global batch of workers * b, so N workers see exactly the
// samples one worker with batch N * b sees. Workers with unequal shares build BatchSlice directly.
BatchSlice worker_slice(int worker, int workers, int64_t per_worker_batch);

// Host `host` of `hosts`, each with `workers_per_host` workers of `per_worker_batch` samples, loads
// the rows its workers compute: [host·N·b, (host + 1)·N·b), in which its worker w takes rows
// [w·b, (w + 1)·b). Its workers are thus the global workers host·N .. host·N + N - 1 of one host
// with all H·N workers, and see their samples.
BatchSlice host_slice(int host, int hosts, int workers_per_host, int64_t per_worker_batch);

}  // namespace cgdp
