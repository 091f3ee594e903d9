// The solver rules on the GPU, the twin of src/solver/update_rule.cpp, and the clip's norm.
#include "launch.cuh"
#include "solver_update.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void update_kernel(T* data, const T* diff, T* h, T* h2, int64_t n, RuleScalars k) {
  const T lr = static_cast<T>(k.lr), decay = static_cast<T>(k.decay), m = static_cast<T>(k.momentum);
  const T delta = static_cast<T>(k.delta);
  CGDP_KERNEL_LOOP(i, n) {
    const T raw = static_cast<T>(static_cast<double>(diff[i]) * k.grad_scale);
    const T g = raw + decay * data[i];
    switch (k.rule) {
      case Rule::kSgd: {
        const T v = m * h[i] + lr * g;
        h[i] = v;
        data[i] -= v;
        break;
      }
      case Rule::kNesterov: {
        const T before = h[i];
        const T v = m * before + lr * g;
        h[i] = v;
        data[i] -= (1 + m) * v - m * before;
        break;
      }
      case Rule::kAdaGrad:
        h[i] += g * g;
        data[i] -= lr * g / (sqrt(h[i]) + delta);
        break;
      case Rule::kRmsProp: {
        const T r = static_cast<T>(k.rms_decay);
        h[i] = r * h[i] + (1 - r) * g * g;
        data[i] -= lr * g / (sqrt(h[i]) + delta);
        break;
      }
      case Rule::kAdaDelta: {
        h[i] = m * h[i] + (1 - m) * g * g;
        const T u = g * sqrt((h2[i] + delta) / (h[i] + delta));
        h2[i] = m * h2[i] + (1 - m) * u * u;
        data[i] -= lr * u;
        break;
      }
      case Rule::kAdam: {
        const T b2 = static_cast<T>(k.momentum2);
        h[i] = m * h[i] + (1 - m) * g;
        h2[i] = b2 * h2[i] + (1 - b2) * g * g;
        data[i] -= static_cast<T>(k.adam_rate) * h[i] / (sqrt(h2[i]) + delta);
        break;
      }
    }
  }
}

template <typename T>
__global__ void sum_squares_kernel(const T* x, int64_t n, double* partial) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0;
  const int64_t stride = static_cast<int64_t>(kReduceThreads) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kReduceThreads) + threadIdx.x; i < n;
       i += stride)
    sum += static_cast<double>(x[i]) * x[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(const double* partial, int count, double* out) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += kReduceThreads) sum += partial[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *out = sum;
}

}  // namespace

template <typename T>
void solver_update(T* data, const T* diff, T* history, T* history2, int64_t n, const RuleScalars& k,
                   cudaStream_t stream) {
  if (n <= 0) return;
  update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(data, diff, history, history2, n, k);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void sum_squares(const T* x, int64_t n, double* out, cudaStream_t stream) {
  // One block alone reads a large gradient at a fraction of the memory's speed (VGG-16: 550 MB).
  sum_squares_kernel<<<kSumSquaresBlocks, kReduceThreads, 0, stream>>>(x, n, out + 1);
  CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kReduceThreads, 0, stream>>>(out + 1, kSumSquaresBlocks, out);
  CUDA_CHECK_LAUNCH();
}

template void solver_update<float>(float*, const float*, float*, float*, int64_t, const RuleScalars&, cudaStream_t);
template void solver_update<double>(double*, const double*, double*, double*, int64_t, const RuleScalars&, cudaStream_t);
template void sum_squares<float>(const float*, int64_t, double*, cudaStream_t);
template void sum_squares<double>(const double*, int64_t, double*, cudaStream_t);

}  // namespace cgdp::kernels
