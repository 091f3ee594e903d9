// Sample order: portable per-epoch shuffles and the arithmetic of positions and slices.
#include "cgdp/data/sampler.hpp"

#include <numeric>
#include <random>
#include <utility>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// A uniform draw from [0, bound) by rejection: drops the top (2^64 mod bound) values so every
// residue is equally likely.
uint64_t below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  uint64_t r;
  do r = engine();
  while (r < threshold);
  return r % bound;
}

// One engine seed per (seed, epoch), so an epoch's permutation is built without the earlier ones.
uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                         static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32)};
  uint32_t words[2];
  sequence.generate(words, words + 2);  // std::seed_seq's algorithm is fixed by the standard
  return uint64_t{words[0]} << 32 | words[1];
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 engine(epoch_seed(seed, epoch));
  for (int64_t i = size - 1; i > 0; --i)
    std::swap(order[i], order[below(engine, static_cast<uint64_t>(i) + 1)]);
  return order;
}

Sampler::Sampler(int64_t dataset_size, Order order, uint64_t seed, SamplerPosition start)
    : size_(dataset_size), order_(order), seed_(seed) {
  if (size_ <= 0) throw DataError("cannot sample from an empty dataset");
  if (start.epoch < 0 || start.offset < 0 || start.offset >= size_)
    throw UsageError(cat("sampler position epoch ", start.epoch, " offset ", start.offset,
                         " is outside a dataset of ", size_, " samples"));
  position_.offset = start.offset;
  enter_epoch(start.epoch);
}

void Sampler::enter_epoch(int64_t epoch) {
  position_.epoch = epoch;
  if (order_ == Order::Shuffled) order_of_epoch_ = epoch_permutation(size_, seed_, epoch);
}

void Sampler::take(int64_t count, std::vector<int64_t>& out) {
  CGDP_ASSERT(count >= 0);
  out.reserve(out.size() + static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = position_.offset;
    out.push_back(order_ == Order::Shuffled ? order_of_epoch_[at] : at);
    if (++position_.offset == size_) {
      position_.offset = 0;
      enter_epoch(position_.epoch + 1);
    }
  }
}

BatchSlice worker_slice(int worker, int workers, int64_t per_worker_batch) {
  if (workers <= 0 || worker < 0 || worker >= workers || per_worker_batch <= 0)
    throw UsageError(cat("worker ", worker, " of ", workers, " with batch ", per_worker_batch,
                         ": expected 0 <= worker < workers and a positive batch"));
  return {worker * per_worker_batch, per_worker_batch};
}

BatchSlice host_slice(int host, int hosts, int workers_per_host, int64_t per_worker_batch) {
  if (workers_per_host <= 0)
    throw UsageError(cat("host ", host, " with ", workers_per_host, " workers: expected at least one"));
  return worker_slice(host, hosts, workers_per_host * per_worker_batch);
}

}  // namespace cgdp
