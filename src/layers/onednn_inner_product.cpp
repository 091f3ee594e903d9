// oneDNN's bf16 matrix multiplies for InnerProduct on the CPU. The operands are narrowed to plain
// row-major bf16 copies by our own loop (a streaming pass; oneDNN's reorders into its blocked
// layouts cost more than the multiplies at Caffe's batch sizes), the matmuls read them through
// strides, and their fp32 results land in the caller's buffers: the weight gradient by a sum
// post-op, since Caffe accumulates.
#include "layers/onednn_inner_product.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cgdp/device/layer_precision.hpp"
#include "layers/onednn_staging.hpp"

namespace cgdp {

using dnnl::memory;
using onednn::cpu_engine;
using onednn::Tag;
using onednn::Type;

namespace {

// A row-major matrix [rows, cols] of `type`, read transposed ([cols, rows]) when `transposed`.
memory::desc matrix(int64_t rows, int64_t cols, Type type, bool transposed = false) {
  return transposed ? memory::desc({cols, rows}, type, Tag::ba)
                    : memory::desc({rows, cols}, type, Tag::ab);
}

// A bf16 copy of a caller's fp32 matrix, narrowed on demand and remembered by address.
struct Narrowed {
  std::vector<uint16_t> values;
  const float* from = nullptr;
  uint16_t* of(const float* data) {
    narrow_to_precision(Precision::kBf16, data, values.data(), static_cast<int64_t>(values.size()));
    from = data;
    return values.data();
  }
  // The copy forward made when `data` is still what it narrowed (Caffe's contract: nothing
  // changes a layer's bottom or weights between its forward and backward), else a new one.
  uint16_t* again(const float* data) { return data == from ? values.data() : of(data); }
};

dnnl::matmul::primitive_desc matmul_desc(const memory::desc& a, const memory::desc& b,
                                         const memory::desc& c, bool accumulate = false) {
  dnnl::primitive_attr attr = onednn::caller_scratchpad();
  if (accumulate) attr.set_post_ops(onednn::adding());
  return {dnnl::matmul::desc(a, b, c), attr, cpu_engine()};
}

}  // namespace

struct OneDnnInnerProduct::Impl {
  OneDnnInnerProductShape shape;
  dnnl::stream stream{cpu_engine()};
  Narrowed in, weights, out_diff;
  // forward: out [M, N] = in [M, K] * W^T. data: in_diff [M, K] = out_diff [M, N] * W.
  // weights: W [N, K] += out_diff^T * in; transposed, W [K, N] += in^T * out_diff.
  memory::desc in_desc, weights_t_desc, out_desc, out_diff_desc, weights_desc, in_diff_desc,
      grad_a_desc, grad_b_desc, weight_diff_desc;
  dnnl::matmul forward, backward_data, backward_weights;
  std::vector<uint8_t> scratch;  // the three matmuls' scratchpad (they run one at a time)
  memory forward_scratch, data_scratch, weights_scratch;

  explicit Impl(const OneDnnInnerProductShape& s);
  void run(dnnl::matmul& mm, memory& scratchpad, const memory::desc& a, const void* a_data,
           const memory::desc& b, const void* b_data, const memory::desc& c, void* c_data) {
    mm.execute(stream, {{DNNL_ARG_SRC, memory(a, cpu_engine(), const_cast<void*>(a_data))},
                        {DNNL_ARG_WEIGHTS, memory(b, cpu_engine(), const_cast<void*>(b_data))},
                        {DNNL_ARG_DST, memory(c, cpu_engine(), c_data)},
                        {DNNL_ARG_SCRATCHPAD, scratchpad}});
    stream.wait();
  }
};

OneDnnInnerProduct::Impl::Impl(const OneDnnInnerProductShape& s) : shape(s) {
  const int64_t m = s.rows, k = s.inputs, n = s.outputs;
  const bool t = s.transpose;
  in.values.resize(static_cast<size_t>(m * k));
  weights.values.resize(static_cast<size_t>(n * k));
  out_diff.values.resize(static_cast<size_t>(m * n));
  in_desc = matrix(m, k, Type::bf16);
  weights_t_desc = t ? matrix(k, n, Type::bf16) : matrix(n, k, Type::bf16, true);  // W^T [K, N]
  out_desc = matrix(m, n, Type::f32);
  const auto forward_pd = matmul_desc(in_desc, weights_t_desc, out_desc);
  out_diff_desc = matrix(m, n, Type::bf16);
  weights_desc = t ? matrix(k, n, Type::bf16, true) : matrix(n, k, Type::bf16);  // W [N, K]
  in_diff_desc = matrix(m, k, Type::f32);
  const auto data_pd = matmul_desc(out_diff_desc, weights_desc, in_diff_desc);
  grad_a_desc = t ? matrix(m, k, Type::bf16, true) : matrix(m, n, Type::bf16, true);
  grad_b_desc = t ? out_diff_desc : in_desc;
  weight_diff_desc = t ? matrix(k, n, Type::f32) : matrix(n, k, Type::f32);
  const auto weights_pd = matmul_desc(grad_a_desc, grad_b_desc, weight_diff_desc, true);
  size_t scratch_bytes = 1;
  for (const auto* pd : {&forward_pd, &data_pd, &weights_pd})
    scratch_bytes = std::max(scratch_bytes, pd->scratchpad_desc().get_size());
  scratch.resize(scratch_bytes);
  forward_scratch = memory(forward_pd.scratchpad_desc(), cpu_engine(), scratch.data());
  data_scratch = memory(data_pd.scratchpad_desc(), cpu_engine(), scratch.data());
  weights_scratch = memory(weights_pd.scratchpad_desc(), cpu_engine(), scratch.data());
  forward = dnnl::matmul(forward_pd);
  backward_data = dnnl::matmul(data_pd);
  backward_weights = dnnl::matmul(weights_pd);
}

std::unique_ptr<OneDnnInnerProduct> OneDnnInnerProduct::create(
    const OneDnnInnerProductShape& shape) {
  try {
    return std::unique_ptr<OneDnnInnerProduct>(new OneDnnInnerProduct(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no bf16 implementation here: the layer rounds operands for OpenBLAS
  }
}

OneDnnInnerProduct::OneDnnInnerProduct(const OneDnnInnerProductShape& shape)
    : impl_(std::make_unique<Impl>(shape)) {}
OneDnnInnerProduct::~OneDnnInnerProduct() = default;

const OneDnnInnerProductShape& OneDnnInnerProduct::shape() const {
  return impl_->shape;
}

void OneDnnInnerProduct::forward(const float* in, const float* weight, float* out) {
  Impl& m = *impl_;
  m.run(m.forward, m.forward_scratch, m.in_desc, m.in.of(in), m.weights_t_desc,
        m.weights.of(weight), m.out_desc, out);
}

void OneDnnInnerProduct::backward(const float* in, const float* weight, const float* out_diff,
                                  float* weight_diff, float* in_diff) {
  Impl& m = *impl_;
  const uint16_t* dy = m.out_diff.of(out_diff);
  if (weight_diff) {
    const uint16_t* x = m.in.again(in);
    const bool t = m.shape.transpose;
    m.run(m.backward_weights, m.weights_scratch, m.grad_a_desc, t ? x : dy, m.grad_b_desc,
          t ? dy : x, m.weight_diff_desc, weight_diff);
  }
  if (in_diff)
    m.run(m.backward_data, m.data_scratch, m.out_diff_desc, dy, m.weights_desc,
          m.weights.again(weight), m.in_diff_desc, in_diff);
}

}  // namespace cgdp
