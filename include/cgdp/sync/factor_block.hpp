// The wire form of one host's sufficient factors for one weight (exchanged_chunks.hpp).
#pragma once

#include <cstdint>

#include "cgdp/sync/exchange_dtype.hpp"

namespace cgdp {

// One host's factor rows of one weight as they travel between hosts: [out rows of its `workers`
// workers][in rows of them] in the exchange's dtype, padded to 4 bytes, then with fp16 each
// worker's two scales (out, in).
struct FactorBlock {
  int64_t out_count = 0;  // elements per worker
  int64_t in_count = 0;
  int workers = 1;
  ExchangeDtype dtype = ExchangeDtype::Fp32;

  int64_t rows_bytes() const;
  int64_t scales_offset() const;  // bytes: the rows rounded up to 4
  int64_t floats() const;         // the block's size on the wire
};

}  // namespace cgdp
