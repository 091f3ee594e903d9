// oneDNN's bf16 matrix multiplies for InnerProduct on the CPU. The operands are narrowed to plain
// row-major bf16 copies by our own loop (a streaming pass; oneDNN's reorders into its blocked
// layouts cost more than the multiplies at Caffe's batch sizes), the matmuls read them through
// strides, and their fp32 results land in the caller's buffers: the weight gradient by a sum
// post-op, since Caffe accumulates. An untransposed weight is multiplied in the layer's slices
// (weight_slices.hpp): a streamed one is narrowed into the stage a slice at a time, and the
// resident one makes the same calls on its narrowed copy, so both give the same bits.
#include "layers/onednn_inner_product.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "cgdp/device/layer_precision.hpp"
#include "layers/onednn_staging.hpp"

namespace cgdp {

using dnnl::memory;
using onednn::cpu_engine;
using onednn::Tag;
using onednn::Type;

namespace {

// [rows, cols] with rows `ld` elements apart, or read transposed ([cols, rows]) through the same
// memory: a slice of a row-major matrix.
memory::desc strided(int64_t rows, int64_t cols, int64_t ld, Type type, bool transposed = false) {
  return transposed ? memory::desc({cols, rows}, type, memory::dims{1, ld})
                    : memory::desc({rows, cols}, type, memory::dims{ld, 1});
}

// A row-major matrix [rows, cols] of `type`, read transposed ([cols, rows]) when `transposed`.
memory::desc matrix(int64_t rows, int64_t cols, Type type, bool transposed = false) {
  return strided(rows, cols, cols, type, transposed);
}

// A bf16 copy of a caller's fp32 matrix of `count` elements, narrowed on demand and remembered by
// address; its memory is taken on first use (a streamed weight never asks for a whole copy).
struct Narrowed {
  int64_t count = 0;
  std::vector<uint16_t> values;
  const float* from = nullptr;
  uint16_t* of(const float* data) {
    values.resize(static_cast<size_t>(count));
    narrow_to_precision(Precision::kBf16, data, values.data(), count);
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
  // The sliced (untransposed) matmuls, built per slice size on first use.
  enum Kind { kForward, kWeightGrad, kData, kDataInPlace };
  struct Sliced {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul matmul;
  };
  std::map<std::pair<Kind, int64_t>, Sliced> sliced;

  OneDnnInnerProductShape shape;
  dnnl::stream stream{cpu_engine()};
  Narrowed in, weights, out_diff;
  // Transposed weights W [K, N], whole: forward out [M, N] = in [M, K] * W; data in_diff [M, K]
  // = out_diff [M, N] * W^T; weights W += in^T * out_diff.
  memory::desc in_desc, weights_t_desc, out_desc, out_diff_desc, weights_desc, in_diff_desc,
      grad_a_desc, grad_b_desc, weight_diff_desc;
  dnnl::matmul forward, backward_data, backward_weights;
  std::vector<uint8_t> scratch;  // the three matmuls' scratchpad (they run one at a time)
  memory forward_scratch, data_scratch, weights_scratch;

  explicit Impl(const OneDnnInnerProductShape& s);
  Sliced& slice(Kind kind, int64_t size);
  void run(Sliced& mm, const void* a, const void* b, void* c) {
    const size_t bytes = mm.pd.scratchpad_desc().get_size();
    if (scratch.size() < bytes) scratch.resize(bytes);
    mm.matmul.execute(
        stream,
        {{DNNL_ARG_SRC, memory(mm.pd.src_desc(), cpu_engine(), const_cast<void*>(a))},
         {DNNL_ARG_WEIGHTS, memory(mm.pd.weights_desc(), cpu_engine(), const_cast<void*>(b))},
         {DNNL_ARG_DST, memory(mm.pd.dst_desc(), cpu_engine(), c)},
         {DNNL_ARG_SCRATCHPAD, memory(mm.pd.scratchpad_desc(), cpu_engine(), scratch.data())}});
    stream.wait();
  }
  void forward_sliced(const float* x, const float* weight, float* out, float* stage);
  void backward_sliced(const float* x, const float* weight, const float* dy, float* weight_diff,
                       float* in_diff, float* stage);
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
  in.count = m * k, weights.count = n * k, out_diff.count = m * n;
  if (!s.transpose) {  // sliced: every slice's matmuls now, so that a shape without kernels is
                       // refused here
    for (const int64_t rows : {s.slice_rows, n % s.slice_rows})
      if (rows > 0) slice(kForward, rows), slice(kWeightGrad, rows);
    for (const int64_t columns : {s.slice_columns, k % s.slice_columns}) {
      if (columns == 0) continue;
      slice(kData, columns);  // the whole weight, or a streamed slice dense in the stage
      if (columns < k) slice(kDataInPlace, columns);
    }
    return;
  }
  // Transposed: one matmul each over the whole weight W [K, N].
  in_desc = matrix(m, k, Type::bf16);
  weights_t_desc = matrix(k, n, Type::bf16);
  out_desc = matrix(m, n, Type::f32);
  const auto forward_pd = matmul_desc(in_desc, weights_t_desc, out_desc);
  out_diff_desc = matrix(m, n, Type::bf16);
  weights_desc = matrix(k, n, Type::bf16, true);  // read as [N, K]
  in_diff_desc = matrix(m, k, Type::f32);
  const auto data_pd = matmul_desc(out_diff_desc, weights_desc, in_diff_desc);
  grad_a_desc = matrix(m, k, Type::bf16, true);
  grad_b_desc = out_diff_desc;
  weight_diff_desc = matrix(k, n, Type::f32);
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

OneDnnInnerProduct::Impl::Sliced& OneDnnInnerProduct::Impl::slice(Kind kind, int64_t size) {
  auto it = sliced.find({kind, size});
  if (it != sliced.end()) return it->second;
  const int64_t m = shape.rows, k = shape.inputs, n = shape.outputs;
  dnnl::matmul::primitive_desc pd;
  if (kind == kForward)  // out[:, r0..r0+r) = in * W[r0..r0+r)^T
    pd = matmul_desc(strided(m, k, k, Type::bf16), strided(size, k, k, Type::bf16, true),
                     strided(m, size, n, Type::f32));
  else if (kind == kWeightGrad)  // W_diff[r0..r0+r) += out_diff[:, r0..r0+r)^T * in
    pd = matmul_desc(strided(m, size, n, Type::bf16, true), strided(m, k, k, Type::bf16),
                     strided(size, k, k, Type::f32), true);
  else  // in_diff[:, c0..c0+c) = out_diff * W[:, c0..c0+c): the columns dense, or in place
    pd = matmul_desc(strided(m, n, n, Type::bf16),
                     strided(n, size, kind == kData ? size : k, Type::bf16),
                     strided(m, size, k, Type::f32));
  return sliced.emplace(std::pair{kind, size}, Sliced{pd, dnnl::matmul(pd)}).first->second;
}

void OneDnnInnerProduct::Impl::forward_sliced(const float* x, const float* weight, float* out,
                                              float* stage) {
  const int64_t k = shape.inputs, n = shape.outputs, per = shape.slice_rows;
  const uint16_t* in_bf16 = in.of(x);
  const uint16_t* resident = stage ? nullptr : weights.of(weight);
  auto* staged = reinterpret_cast<uint16_t*>(stage);
  for (int64_t r0 = 0; r0 < n; r0 += per) {
    const int64_t r = std::min(per, n - r0);
    const uint16_t* rows = resident ? resident + r0 * k : staged;
    if (!resident) narrow_to_precision(Precision::kBf16, weight + r0 * k, staged, r * k);
    run(slice(kForward, r), in_bf16, rows, out + r0);
  }
}

void OneDnnInnerProduct::Impl::backward_sliced(const float* x, const float* weight, const float* dy,
                                               float* weight_diff, float* in_diff, float* stage) {
  const int64_t k = shape.inputs, n = shape.outputs;
  const uint16_t* dy_bf16 = out_diff.of(dy);
  if (weight_diff) {
    const uint16_t* in_bf16 = in.again(x);
    for (int64_t r0 = 0; r0 < n; r0 += shape.slice_rows) {
      const int64_t r = std::min(shape.slice_rows, n - r0);
      const size_t bytes = static_cast<size_t>(r * k) * sizeof(float);
      float* rows = weight_diff + r0 * k;
      if (stage) std::memcpy(stage, rows, bytes);  // accumulated in the stage, as Caffe's
      run(slice(kWeightGrad, r), dy_bf16 + r0, in_bf16, stage ? stage : rows);
      if (stage) std::memcpy(rows, stage, bytes);
    }
  }
  if (!in_diff) return;
  const int64_t per = shape.slice_columns;
  const uint16_t* resident = stage ? nullptr : weights.again(weight);
  auto* staged = reinterpret_cast<uint16_t*>(stage);
  for (int64_t c0 = 0; c0 < k; c0 += per) {
    const int64_t c = std::min(per, k - c0);
    if (resident) {  // read in place, rows k apart: the same products as from a dense block
      run(slice(c == k ? kData : kDataInPlace, c), dy_bf16, resident + c0, in_diff + c0);
      continue;
    }
#pragma omp parallel for schedule(static)  // rows too short for the narrowing's own threads
    for (int64_t o = 0; o < n; ++o)
      narrow_to_precision(Precision::kBf16, weight + o * k + c0, staged + o * c, c);
    run(slice(kData, c), dy_bf16, staged, in_diff + c0);
  }
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

void OneDnnInnerProduct::forward(const float* in, const float* weight, float* out, float* stage) {
  Impl& m = *impl_;
  if (!m.shape.transpose) return m.forward_sliced(in, weight, out, stage);
  m.run(m.forward, m.forward_scratch, m.in_desc, m.in.of(in), m.weights_t_desc,
        m.weights.of(weight), m.out_desc, out);
}

void OneDnnInnerProduct::backward(const float* in, const float* weight, const float* out_diff,
                                  float* weight_diff, float* in_diff, float* stage) {
  Impl& m = *impl_;
  if (!m.shape.transpose)
    return m.backward_sliced(in, weight, out_diff, weight_diff, in_diff, stage);
  const uint16_t* dy = m.out_diff.of(out_diff);
  if (weight_diff) {
    m.run(m.backward_weights, m.weights_scratch, m.grad_a_desc, m.in.again(in), m.grad_b_desc, dy,
          m.weight_diff_desc, weight_diff);
  }
  if (in_diff)
    m.run(m.backward_data, m.data_scratch, m.out_diff_desc, dy, m.weights_desc,
          m.weights.again(weight), m.in_diff_desc, in_diff);
}

}  // namespace cgdp
