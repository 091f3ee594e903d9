// Sufficient factors (Poseidon, Zhang et al., USENIX ATC'17, sec. 4.3): a layer whose weight
// gradient is a sum over rows of outer products, dW = sum_r out_diff[r] (x) in[r] (InnerProduct),
// can hand over its rows of out_diff and in instead of dW. Whoever holds every worker's rows
// rebuilds the summed gradient with one GEMM whose inner size is all the rows. For M inputs, N
// outputs and K rows that is K (M + N) numbers instead of M N.
#pragma once

#include <cstdint>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

struct FactorShape {
  int64_t rows = 0;     // per micro-batch: samples times the positions before the layer's axis
  int64_t outputs = 0;  // width of out_diff's rows (the layer's outputs)
  int64_t inputs = 0;   // width of in's rows (the layer's inputs)
  int64_t out_elements() const { return rows * outputs; }
  int64_t in_elements() const { return rows * inputs; }
  int64_t elements() const { return out_elements() + in_elements(); }
};

template <typename T>
class SufficientFactors {
 public:
  virtual ~SufficientFactors() = default;
  // The shape at the net's current batch.
  virtual FactorShape factor_shape() const = 0;
  // From now on backward leaves the weight gradient alone and instead copies micro-batch m's rows
  // of out_diff to out_rows + m * out_elements() and of in to in_rows + m * in_elements() (device
  // memory, on the compute stream); both null: back to computing the weight gradient.
  virtual void stage_factors(T* out_rows, T* in_rows) = 0;
  // Overwrites the weight gradient with sum_r out_rows[r] (x) in_rows[r] over `rows` rows (device
  // memory, row-major), as one GEMM issued on ctx.stream (which may be any stream of the device).
  virtual void rebuild_weight_diff(const RunContext& ctx, const T* out_rows, const T* in_rows,
                                   int64_t rows) = 0;
  // Whether the rebuild can read rows that arrived as bf16 (a bf16 exchange) as they are: one
  // tensor-core GEMM accumulating in fp32, instead of widening them first.
  virtual bool rebuilds_from_bf16() const { return false; }
  // The rebuild from bf16 rows (raw bits, same layout); only where rebuilds_from_bf16().
  virtual void rebuild_weight_diff_bf16(const RunContext& ctx, const uint16_t* out_rows,
                                        const uint16_t* in_rows, int64_t rows) = 0;
};

}  // namespace cgdp
