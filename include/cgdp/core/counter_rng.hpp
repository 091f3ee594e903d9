// Counter-based random numbers: each draw is a pure function of its counters (seed, layer, step,
// sample, element), so any split of a batch across threads, workers or devices draws the same
// numbers as one worker processing the whole batch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#if defined(__CUDACC__)
#define CGDP_HOST_DEVICE __host__ __device__
#else
#define CGDP_HOST_DEVICE
#endif

namespace cgdp {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output finaliser: a bijection on 64 bits with full avalanche.
CGDP_HOST_DEVICE constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Folds one more counter into a key; mixing the key first keeps (key, c) pairs from colliding
// in the simple ways an add or xor would.
CGDP_HOST_DEVICE constexpr uint64_t fold_counter(uint64_t key, uint64_t counter) {
  return mix64(mix64(key + kGoldenGamma) ^ counter);
}

// FNV-1a: a stable hash of a name (std::hash may differ between builds).
constexpr uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// A random stream addressed by a list of counters: element i is the i-th output of the
// SplitMix64 sequence whose state is the folded key.
class CounterRng {
 public:
  CGDP_HOST_DEVICE explicit constexpr CounterRng(uint64_t key) : key_(key) {}
  constexpr CounterRng(std::initializer_list<uint64_t> counters) {
    for (uint64_t c : counters) key_ = fold_counter(key_, c);
  }

  CGDP_HOST_DEVICE constexpr uint64_t bits(uint64_t i) const {
    return mix64(key_ + (i + 1) * kGoldenGamma);
  }
  // Uniform in [0, 1) from the top 53 bits.
  CGDP_HOST_DEVICE constexpr double uniform(uint64_t i) const {
    return static_cast<double>(bits(i) >> 11) * 0x1.0p-53;
  }
  CGDP_HOST_DEVICE constexpr uint64_t key() const { return key_; }

 private:
  uint64_t key_ = 0;
};

}  // namespace cgdp
