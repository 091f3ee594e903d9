// A host's factor rows of one weight on the wire: rows, padding to 4 bytes, fp16's scales.
#include "cgdp/sync/factor_block.hpp"

namespace cgdp {

int64_t FactorBlock::rows_bytes() const {
  return workers * (out_count + in_count) * element_bytes(dtype);
}

int64_t FactorBlock::scales_offset() const {
  return (rows_bytes() + 3) / 4 * 4;
}

int64_t FactorBlock::floats() const {
  return scales_offset() / 4 + (dtype == ExchangeDtype::Fp16 ? 2 * workers : 0);
}

}  // namespace cgdp
