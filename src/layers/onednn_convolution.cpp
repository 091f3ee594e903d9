// oneDNN's convolution primitives for the CPU backend. The primitives and their reorders are
// built once per shape; each call binds the caller's buffers and runs them on the calling thread's
// OpenMP team (oneDNN here is built on the OpenMP runtime, like the rest of the CPU backend).
#include "layers/onednn_convolution.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "cgdp/layers/relu_layer.hpp"
#include "layers/onednn_staging.hpp"

namespace cgdp {

using dnnl::memory;
using onednn::any;
using onednn::cpu_engine;
using onednn::plain;
using onednn::Staged;
using onednn::Tag;
using onednn::Type;

struct OneDnnConvolution::Impl {
  OneDnnShape shape;
  dnnl::stream stream{cpu_engine()};
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  // Forward: src, weights, dst. Backward data: diff_dst, weights, diff_src. Backward weights:
  // src, diff_dst, diff_weights (added to the layer's by its reorder: Caffe accumulates).
  std::optional<Staged> src, weights, dst, bd_diff_dst, bd_weights, bd_diff_src, bw_src,
      bw_diff_dst, bw_diff_weights;
  // Layouts that coincide, so one reorder serves both: forward's src and backward-weights' (then
  // the bottom forward reordered is reused, `src_loaded`), and the two backward diff_dst's.
  bool shared_src = false, shared_diff_dst = false;
  const float* src_loaded = nullptr;  // the bottom that src->inner holds, as forward left it
  memory bias, diff_bias;
  std::vector<float> bias_grad;
  std::vector<float> scratch;  // the three primitives' scratchpad (they run one at a time)
  memory fwd_scratch, bd_scratch, bw_scratch;

  explicit Impl(const OneDnnShape& s);
};

OneDnnConvolution::Impl::Impl(const OneDnnShape& s) : shape(s) {
  const ConvGeometry& g = s.geometry;
  const memory::dims src_dims{s.batch, g.channels, g.height, g.width};
  const memory::dims dst_dims{s.batch, s.num_output, g.out_h(), g.out_w()};
  // Caffe's [num_output, C / group, kh, kw] is oneDNN's goihw when cut per group.
  const bool grouped = s.group > 1;
  const memory::dims weight_dims =
      grouped ? memory::dims{s.group, s.num_output / s.group, g.channels / s.group, g.kernel_h,
                             g.kernel_w}
              : memory::dims{s.num_output, g.channels, g.kernel_h, g.kernel_w};
  const memory::desc plain_src = plain(src_dims, Tag::nchw), plain_dst = plain(dst_dims, Tag::nchw);
  const memory::desc plain_weights = plain(weight_dims, grouped ? Tag::goihw : Tag::oihw);
  const memory::desc bias_desc = plain({s.num_output}, Tag::x);
  const memory::desc no_bias;
  const memory::dims strides{g.stride_h, g.stride_w}, pads{g.pad_h, g.pad_w};
  const memory::dims dilates{g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps
  const auto direct = dnnl::algorithm::convolution_direct;
  // What the multiplies read; what is written (outputs, gradients) stays fp32.
  const Type in_type = s.bf16 ? Type::bf16 : Type::f32;

  // Scratch of our own per layer (caller_scratchpad says why).
  dnnl::primitive_attr attr = onednn::caller_scratchpad(), plain_attr = onednn::caller_scratchpad();
  if (s.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  const dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct,
                                      any(src_dims, in_type), any(weight_dims, in_type),
                                      s.bias ? bias_desc : no_bias, any(dst_dims), strides, dilates,
                                      pads, pads),
      attr, cpu_engine());
  const dnnl::convolution_backward_data::primitive_desc bwd_data(
      dnnl::convolution_backward_data::desc(direct, any(src_dims), any(weight_dims, in_type),
                                            any(dst_dims, in_type), strides, dilates, pads, pads),
      plain_attr, cpu_engine(), fwd);
  const dnnl::convolution_backward_weights::primitive_desc bwd_weights(
      dnnl::convolution_backward_weights::desc(direct, any(src_dims, in_type), any(weight_dims),
                                               s.bias ? bias_desc : no_bias, any(dst_dims, in_type),
                                               strides, dilates, pads, pads),
      plain_attr, cpu_engine(), fwd);
  size_t scratch_bytes = 0;
  for (const memory::desc& d :
       {fwd.scratchpad_desc(), bwd_data.scratchpad_desc(), bwd_weights.scratchpad_desc()})
    scratch_bytes = std::max(scratch_bytes, d.get_size());
  scratch.resize(std::max<size_t>(1, (scratch_bytes + sizeof(float) - 1) / sizeof(float)));
  fwd_scratch = memory(fwd.scratchpad_desc(), cpu_engine(), scratch.data());
  bd_scratch = memory(bwd_data.scratchpad_desc(), cpu_engine(), scratch.data());
  bw_scratch = memory(bwd_weights.scratchpad_desc(), cpu_engine(), scratch.data());
  forward = dnnl::convolution_forward(fwd);
  backward_data = dnnl::convolution_backward_data(bwd_data);
  backward_weights = dnnl::convolution_backward_weights(bwd_weights);

  src.emplace(plain_src, fwd.src_desc(), true, false);
  weights.emplace(plain_weights, fwd.weights_desc(), true, false);
  dst.emplace(plain_dst, fwd.dst_desc(), false, true);
  bd_diff_dst.emplace(plain_dst, bwd_data.diff_dst_desc(), true, false);
  bd_weights.emplace(plain_weights, bwd_data.weights_desc(), true, false);
  bd_diff_src.emplace(plain_src, bwd_data.diff_src_desc(), false, true);
  bw_src.emplace(plain_src, bwd_weights.src_desc(), true, false);
  bw_diff_dst.emplace(plain_dst, bwd_weights.diff_dst_desc(), true, false);
  bw_diff_weights.emplace(plain_weights, bwd_weights.diff_weights_desc(), false, true,
                          /*accumulate=*/true);
  shared_src = fwd.src_desc() == bwd_weights.src_desc();
  shared_diff_dst = bwd_data.diff_dst_desc() == bwd_weights.diff_dst_desc();
  if (s.bias) {
    bias = memory(bias_desc, cpu_engine(), DNNL_MEMORY_NONE);
    bias_grad.resize(static_cast<size_t>(s.num_output));
    diff_bias = memory(bias_desc, cpu_engine(), bias_grad.data());
  }
}

std::unique_ptr<OneDnnConvolution> OneDnnConvolution::create(const OneDnnShape& shape) {
  try {
    return std::unique_ptr<OneDnnConvolution>(new OneDnnConvolution(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no oneDNN implementation for this shape: the caller keeps im2col + GEMM
  }
}

OneDnnConvolution::OneDnnConvolution(const OneDnnShape& shape)
    : impl_(std::make_unique<Impl>(shape)) {}
OneDnnConvolution::~OneDnnConvolution() = default;

const OneDnnShape& OneDnnConvolution::shape() const {
  return impl_->shape;
}

void OneDnnConvolution::forward(const float* in, const float* weight, const float* bias,
                                float* out) {
  Impl& m = *impl_;
  m.src_loaded = in;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, m.src->load(m.stream, in)},
                                       {DNNL_ARG_WEIGHTS, m.weights->load(m.stream, weight)},
                                       {DNNL_ARG_DST, m.dst->target(out)},
                                       {DNNL_ARG_SCRATCHPAD, m.fwd_scratch}};
  if (m.shape.bias) {
    m.bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, m.bias);
  }
  m.forward.execute(m.stream, args);
  m.dst->store(m.stream);
  m.stream.wait();
}

void OneDnnConvolution::backward(const float* in, const float* weight, const float* out,
                                 float* out_diff, float* weight_diff, float* bias_diff,
                                 float* in_diff) {
  Impl& m = *impl_;
  if (m.shape.relu) {  // the absorbed ReLU's backward, in place as the layer would have run it
    const int64_t image = m.shape.num_output * m.shape.geometry.out_h() * m.shape.geometry.out_w();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < m.shape.batch; ++n)
      relu_gradient(out + n * image, out_diff + n * image, out_diff + n * image, image);
  }
  // The bottom is unchanged since forward (Caffe's contract: backward reads what forward read).
  memory& src = m.shared_src && in == m.src_loaded ? m.src->inner : m.bw_src->load(m.stream, in);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_DIFF_DST, m.bw_diff_dst->load(m.stream, out_diff)},
      {DNNL_ARG_DIFF_WEIGHTS, m.bw_diff_weights->target(weight_diff)},
      {DNNL_ARG_SCRATCHPAD, m.bw_scratch}};
  if (m.shape.bias) args.emplace(DNNL_ARG_DIFF_BIAS, m.diff_bias);
  m.backward_weights.execute(m.stream, args);
  m.bw_diff_weights->store(m.stream);
  if (in_diff) {
    memory& diff_dst =
        m.shared_diff_dst ? m.bw_diff_dst->inner : m.bd_diff_dst->load(m.stream, out_diff);
    m.backward_data.execute(m.stream,
                            {{DNNL_ARG_DIFF_DST, diff_dst},
                             {DNNL_ARG_WEIGHTS, m.bd_weights->load(m.stream, weight)},
                             {DNNL_ARG_DIFF_SRC, m.bd_diff_src->target(in_diff)},
                             {DNNL_ARG_SCRATCHPAD, m.bd_scratch}});
    m.bd_diff_src->store(m.stream);
  }
  m.stream.wait();
  for (size_t o = 0; o < m.bias_grad.size(); ++o) bias_diff[o] += m.bias_grad[o];
}

}  // namespace cgdp
