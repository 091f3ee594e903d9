// The device scratch of the solver's sum of squares (solver_update.cuh): plain C++, so that the
// memory estimate counts it where no CUDA header may be included.
#pragma once

#include <cstdint>

namespace cgdp::kernels {

// Blocks of the sum of squares' first pass: a fixed count, so the order of the sums is fixed.
inline constexpr int kSumSquaresBlocks = 128;
// Its output: the total, then each block's partial sum.
inline constexpr int64_t kSumSquaresBytes = (kSumSquaresBlocks + 1) * sizeof(double);

}  // namespace cgdp::kernels
