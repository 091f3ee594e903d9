// What a cgdp worker keeps on its device for the weights sent as sufficient factors
// (cgdp_sync.cpp allocates it; the memory estimate counts it from here).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/exchange_dtype.hpp"

namespace cgdp {

struct FactorBufferBytes {
  int64_t staged = 0;      // fp32: each factored weight's own rows, in a buffer of its own
  int64_t gathered = 0;    // fp32: every worker's rows of the largest (one weight at a time)
  int64_t narrow = 0;      // 16-bit exchange: those rows as they land
  int64_t own_narrow = 0;  // 16-bit exchange: the worker's own rows of the largest, narrowed
  int64_t scales = 0;      // 16-bit exchange: two per weight, then two per worker
  int64_t total() const { return staged + gathered + narrow + own_narrow + scales; }
};

// `factored`: per param layer; `samples`: per worker and iteration (batch times micro-batches);
// `workers`: whose rows each worker receives (every host's). Nothing when no weight is factored.
inline FactorBufferBytes factor_buffer_bytes(std::span<const ParamLayer> params,
                                             const std::vector<bool>& factored, int64_t samples,
                                             int64_t workers, ExchangeDtype dtype) {
  FactorBufferBytes b;
  int64_t largest_own = 0, weights = 0;
  for (size_t i = 0; i < params.size(); ++i)
    if (factored[i]) {
      const int64_t own = params[i].factors.elements() * samples;
      b.staged += own * int64_t{sizeof(float)};
      largest_own = std::max(largest_own, own);
      ++weights;
    }
  if (weights == 0) return b;
  b.gathered = workers * largest_own * int64_t{sizeof(float)};
  if (dtype != ExchangeDtype::Fp32) {
    b.narrow = workers * largest_own * int64_t{sizeof(uint16_t)};
    b.own_narrow = largest_own * int64_t{sizeof(uint16_t)};
    b.scales = 2 * (weights + workers) * int64_t{sizeof(float)};
  }
  return b;
}

}  // namespace cgdp
