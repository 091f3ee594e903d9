// oneDNN's convolution primitives for the CPU backend. The primitives and their reorders are
// built once per shape; each call binds the caller's buffers and runs them on the calling thread's
// OpenMP team (oneDNN here is built on the OpenMP runtime, like the rest of the CPU backend).
#include "layers/onednn_convolution.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "cgdp/core/error.hpp"
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
  std::optional<Staged> bw_src_packed;  // bf16: from the input's bf16 copy in the caller's layout
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

namespace {

// What every primitive of a shape is described with: Caffe's tensors as the caller holds them,
// and the convolution's geometry as oneDNN counts it.
struct Dims {
  memory::dims src, dst, weights, strides, pads, dilates;
  bool grouped;
  Type in_type;       // what the multiplies read; what is written (outputs, gradients) stays fp32
  memory::desc bias;  // empty without a bias
  explicit Dims(const OneDnnShape& s) {
    const ConvGeometry& g = s.geometry;
    src = {s.batch, g.channels, g.height, g.width};
    dst = {s.batch, s.num_output, g.out_h(), g.out_w()};
    // Caffe's [num_output, C / group, kh, kw] is oneDNN's goihw when cut per group.
    grouped = s.group > 1;
    weights = grouped ? memory::dims{s.group, s.num_output / s.group, g.channels / s.group,
                                     g.kernel_h, g.kernel_w}
                      : memory::dims{s.num_output, g.channels, g.kernel_h, g.kernel_w};
    strides = {g.stride_h, g.stride_w}, pads = {g.pad_h, g.pad_w};
    dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps
    in_type = s.bf16 ? Type::bf16 : Type::f32;
    if (s.bias) bias = plain({s.num_output}, Tag::x);
  }
};

// oneDNN's tags for channel block `block` of these dims: NHWC when it holds every channel, and
// nChw16c, 8c or 4c (with 16 channels, NHWC and nChw16c are the same bytes under two names).
std::vector<Tag> block_tags(const memory::dims& dims, int64_t block) {
  if (block == 1) return {Tag::nchw};
  std::vector<Tag> tags;
  if (block == dims[1]) tags.push_back(Tag::nhwc);
  if (block == 16) tags.push_back(Tag::nChw16c);
  if (block == 8) tags.push_back(Tag::nChw8c);
  if (block == 4) tags.push_back(Tag::nChw4c);
  return tags;
}

// Which channel block oneDNN's `desc` is, 1 if none.
int64_t block_of(const memory::desc& desc, const memory::dims& dims, Type type) {
  for (int64_t block : {dims[1], int64_t{16}, int64_t{8}, int64_t{4}}) {
    if (dims[1] % block != 0) continue;
    for (Tag tag : block_tags(dims, block))
      if (desc == memory::desc(dims, type, tag)) return block;
  }
  return 1;
}

// The caller's tensor (fp32, or a bf16 copy) in channel block `block`, named as the primitive's
// `wanted` layout is where the two coincide, so that Staged sees them equal and binds the caller's
// buffer.
memory::desc caller_desc(const memory::dims& dims, int64_t block, const memory::desc& wanted,
                         Type type = Type::f32) {
  const std::vector<Tag> tags = block_tags(dims, block);
  for (Tag tag : tags)
    if (wanted == memory::desc(dims, wanted.data_type(), tag)) return memory::desc(dims, type, tag);
  return memory::desc(dims, type, tags.empty() ? Tag::nchw : tags.front());
}

dnnl::convolution_forward::primitive_desc forward_desc(const OneDnnShape& s,
                                                       const dnnl::primitive_attr& attr) {
  const Dims d(s);
  return dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, any(d.src, d.in_type),
                                      any(d.weights, d.in_type), d.bias, any(d.dst), d.strides,
                                      d.dilates, d.pads, d.pads),
      attr, cpu_engine());
}

}  // namespace

OneDnnConvolution::Impl::Impl(const OneDnnShape& s) : shape(s) {
  const Dims d(s);
  const memory::desc plain_weights = plain(d.weights, d.grouped ? Tag::goihw : Tag::oihw);
  const auto direct = dnnl::algorithm::convolution_direct;

  // Scratch of our own per layer (caller_scratchpad says why).
  dnnl::primitive_attr attr = onednn::caller_scratchpad(), plain_attr = onednn::caller_scratchpad();
  if (s.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  const dnnl::convolution_forward::primitive_desc fwd = forward_desc(s, attr);
  const memory::desc plain_src = caller_desc(d.src, s.src_block, fwd.src_desc());
  const memory::desc plain_dst = caller_desc(d.dst, s.dst_block, fwd.dst_desc());
  const dnnl::convolution_backward_data::primitive_desc bwd_data(
      dnnl::convolution_backward_data::desc(direct, any(d.src), any(d.weights, d.in_type),
                                            any(d.dst, d.in_type), d.strides, d.dilates, d.pads,
                                            d.pads),
      plain_attr, cpu_engine(), fwd);
  const dnnl::convolution_backward_weights::primitive_desc bwd_weights(
      dnnl::convolution_backward_weights::desc(direct, any(d.src, d.in_type), any(d.weights),
                                               d.bias, any(d.dst, d.in_type), d.strides, d.dilates,
                                               d.pads, d.pads),
      plain_attr, cpu_engine(), fwd);
  size_t scratch_bytes = 0;
  for (const memory::desc& pad :
       {fwd.scratchpad_desc(), bwd_data.scratchpad_desc(), bwd_weights.scratchpad_desc()})
    scratch_bytes = std::max(scratch_bytes, pad.get_size());
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
  if (s.bf16)
    bw_src_packed.emplace(caller_desc(d.src, s.src_block, bwd_weights.src_desc(), Type::bf16),
                          bwd_weights.src_desc(), true, false);
  bw_diff_dst.emplace(plain_dst, bwd_weights.diff_dst_desc(), true, false);
  bw_diff_weights.emplace(plain_weights, bwd_weights.diff_weights_desc(), false, true,
                          /*accumulate=*/true);
  shared_src = fwd.src_desc() == bwd_weights.src_desc();
  shared_diff_dst = bwd_data.diff_dst_desc() == bwd_weights.diff_dst_desc();
  if (s.bias) {
    bias = memory(d.bias, cpu_engine(), DNNL_MEMORY_NONE);
    bias_grad.resize(static_cast<size_t>(s.num_output));
    diff_bias = memory(d.bias, cpu_engine(), bias_grad.data());
  }
}

std::unique_ptr<OneDnnConvolution> OneDnnConvolution::create(const OneDnnShape& shape) {
  try {
    return std::unique_ptr<OneDnnConvolution>(new OneDnnConvolution(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no oneDNN implementation for this shape: the caller keeps im2col + GEMM
  }
}

OneDnnConvolution::Blocks OneDnnConvolution::preferred_blocks(const OneDnnShape& shape) {
  try {
    const Dims d(shape);
    const auto fwd = forward_desc(shape, onednn::caller_scratchpad());
    return {block_of(fwd.src_desc(), d.src, d.in_type), block_of(fwd.dst_desc(), d.dst, Type::f32)};
  } catch (const dnnl::error&) {
    return {};
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
                                 float* in_diff, const uint16_t* in_packed) {
  Impl& m = *impl_;
  // The absorbed ReLU's backward, in place as the layer would have run it.
  if (m.shape.relu && out) {
    const int64_t image = m.shape.num_output * m.shape.geometry.out_h() * m.shape.geometry.out_w();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < m.shape.batch; ++n)
      relu_gradient(out + n * image, out_diff + n * image, out_diff + n * image, image);
  }
  // The bottom is unchanged since forward (Caffe's contract: backward reads what forward read).
  CGDP_ASSERT(!in_packed || m.bw_src_packed);  // a bf16 copy only where the multiplies are bf16
  memory& src = m.shared_src && in == m.src_loaded ? m.src->inner
                : in_packed && m.bw_src_packed     ? m.bw_src_packed->load(m.stream, in_packed)
                                                   : m.bw_src->load(m.stream, in);
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
