// Convolution on the CPU: float runs on oneDNN when cgdp is built with it (onednn()); otherwise
// each image is unfolded by im2col and multiplied by the weights, one GEMM per group. A batch
// that can keep every OpenMP thread busy runs one image per thread with single-threaded GEMMs
// (OpenBLAS does not thread inside a parallel region); a smaller one runs its images in order and
// lets OpenBLAS thread each GEMM.
#include "cgdp/layers/convolution_layer.hpp"

#include <omp.h>

#include <algorithm>
#include <span>
#include <type_traits>

#include "cgdp/device/cuda_options.hpp"
#include "cgdp/layers/blas.hpp"
#include "cgdp/layers/filler.hpp"
#include "cgdp/layers/relu_layer.hpp"
#include "cgdp/layers/spatial_param.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "layers/rounded_operands.hpp"
#ifdef CGDP_HAVE_ONEDNN
#include "layers/onednn_convolution.hpp"
#endif

namespace cgdp {

namespace {

// Threads that split the images: all of them when each gets at least one image, else one.
int image_threads(int64_t images) {
  const int threads = omp_get_max_threads();
  return images >= threads ? threads : 1;
}

// Runs fn(image, thread) for every image, over `threads` threads (image_threads()).
template <typename Fn>
void for_each_image(int64_t images, int threads, Fn&& fn) {
  if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t n = 0; n < images; ++n) fn(n, omp_get_thread_num());
  } else {
    for (int64_t n = 0; n < images; ++n) fn(n, 0);
  }
}

}  // namespace

template <typename T>
void ConvolutionLayer<T>::read_geometry() {
  geometry_ = kernel_geometry(this->param_.convolution_param());
}

template <typename T>
void ConvolutionLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  const auto& p = this->param_.convolution_param();
  if (bottom[0]->num_axes() != 4)
    this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(bottom[0]->shape())));
  read_geometry();
  num_output_ = p.num_output();
  group_ = p.group();
  bias_term_ = p.bias_term();
  const int64_t channels = bottom[0]->shape(1);
  if (num_output_ <= 0) this->fail("needs num_output > 0");
  if (group_ <= 0) this->fail("group must be > 0");
  if (channels % group_ != 0)
    this->fail(cat("input channels (", channels, ") must be a multiple of group (", group_, ")"));
  if (num_output_ % group_ != 0)
    this->fail(cat("num_output (", num_output_, ") must be a multiple of group (", group_, ")"));
  geometry_.channels = channels;
#ifdef CGDP_HAVE_ONEDNN
  // oneDNN's kernels vectorise over input channels: on a net's first layer (1 or 3 channels)
  // im2col + GEMM measured faster, most of all in backward (on an AMX Xeon AlexNet's conv1 is
  // the exception, fashion_cnn's is not: docs/results.md).
  use_onednn_ = std::is_same_v<T, float> && this->device_->kind() == DeviceKind::Cpu &&
                p.engine() != proto::ConvolutionParameter::CAFFE &&
                channels / group_ >= kOneDnnMinChannels;
#endif
  fill(this->add_param({num_output_, channels / group_, geometry_.kernel_h, geometry_.kernel_w}),
       p.weight_filler(), rng);
  if (bias_term_) fill(this->add_param({num_output_}), p.bias_filler(), rng);
}

template <typename T>
void ConvolutionLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Blob<T>& in = *bottom[0];
  if (in.num_axes() != 4)
    this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(in.shape())));
  if (in.shape(1) != geometry_.channels)
    this->fail(cat("bottom has ", in.shape(1), " channels; the weights were made for ",
                   geometry_.channels));
  geometry_.height = in.shape(2), geometry_.width = in.shape(3);
  const int64_t padded_h = geometry_.height + 2 * geometry_.pad_h;
  const int64_t padded_w = geometry_.width + 2 * geometry_.pad_w;
  if (geometry_.extent_h() > padded_h || geometry_.extent_w() > padded_w) {
    const bool dilated = geometry_.dilation_h > 1 || geometry_.dilation_w > 1;
    this->fail(cat("kernel ", geometry_.kernel_h, "x", geometry_.kernel_w,
                   dilated
                       ? cat(" (dilated to ", geometry_.extent_h(), "x", geometry_.extent_w(), ")")
                       : std::string(),
                   " is larger than the padded input ", padded_h, "x", padded_w));
  }
  top[0]->reshape({in.shape(0), num_output_, geometry_.out_h(), geometry_.out_w()});
#ifdef CGDP_HAVE_ONEDNN
  if (use_onednn_) {
    const OneDnnConvolution::Blocks blocks =
        OneDnnConvolution::preferred_blocks(onednn_shape(in.shape(0)));
    preferred_src_block_ = blocks.src, preferred_dst_block_ = blocks.dst;
  }
#endif
}

template <typename T>
ReluAbsorption ConvolutionLayer<T>::absorb_relu() {
  // On CUDA in 16 bits the ReLU's forward joins the widening of the result
  // (cuda/half_operands.hpp), and its backward stays apart, one step before this layer's, where
  // the output's 16-bit copy it reads is then freed (the activations' arena); in fp32 cuDNN's path
  // runs it apart.
  const bool cpu = this->device_->kind() == DeviceKind::Cpu;
  relu_forward_ = cpu || (this->device_->kind() == DeviceKind::Cuda && multiplies_in_half<T>());
  relu_backward_ = cpu;
  return relu_backward_  ? ReluAbsorption::kForwardAndBackward
         : relu_forward_ ? ReluAbsorption::kForward
                         : ReluAbsorption::kNone;
}

template <typename T>
bool ConvolutionLayer<T>::cuda_channels_last() const {
  return std::is_same_v<T, float> && is_16_bit(layer_precision()) && channel_blocks_enabled() &&
         geometry_.channels / group_ % 8 == 0 && group_out_channels() % 8 == 0;
}

template <typename T>
std::vector<int64_t> ConvolutionLayer<T>::cudnn_problem(const Shape& in, const Shape&) const {
  const ConvGeometry& g = geometry_;
  const CudaOptions& o = cuda_options();
  std::vector<int64_t> problem{static_cast<int64_t>(sizeof(T)),
                               in[0],
                               in[1],
                               in[2],
                               in[3],
                               num_output_,
                               g.kernel_h,
                               g.kernel_w,
                               g.pad_h,
                               g.pad_w,
                               g.stride_h,
                               g.stride_w,
                               g.dilation_h,
                               g.dilation_w,
                               group_,
                               o.tf32,
                               o.deterministic,
                               static_cast<int64_t>(o.workspace_limit_bytes)};
  // 16-bit problems apart from fp32 ones, bf16 from fp16, channels last from NCHW (fp32 keys as
  // files stored before channels last existed hold them).
  if (multiplies_in_half<T>())
    problem.insert(problem.end(),
                   {static_cast<int64_t>(layer_precision()), int64_t{cuda_channels_last()}});
  return problem;
}

template <typename T>
std::vector<ConvPassProblem> ConvolutionLayer<T>::cudnn_passes(const Shape& bottom,
                                                               const Shape& top, bool backward,
                                                               bool input_gradient) const {
  const std::vector<int64_t> problem = cudnn_problem(bottom, top);
  std::vector<ConvPassProblem> passes{{ConvPass::Forward, problem}};
  if (backward) passes.push_back({ConvPass::BackwardFilter, problem});
  if (backward && input_gradient) passes.push_back({ConvPass::BackwardData, problem});
  return passes;
}

template <typename T>
int64_t ConvolutionLayer<T>::work_count() const {
  // A pointwise kernel multiplies the image itself and needs no scratch.
  if (geometry_.is_pointwise()) return 0;
  return unfolded_rows() * out_pixels() + geometry_.scratch_count();
}

template <typename T>
T* ConvolutionLayer<T>::work_buffer(int threads) {
  const size_t need = static_cast<size_t>(threads * work_count());
  if (work_.size() < need) work_.resize(need);
  return work_.data();
}

template <typename T>
const T* ConvolutionLayer<T>::unfold(const T* in, T* work) const {
  if (geometry_.is_pointwise()) return in;
  const int64_t pixels = out_pixels();
  im2col(in, geometry_, work, work + unfolded_rows() * pixels);
  if (folds_bias()) std::fill_n(work + geometry_.col_rows() * pixels, pixels, T(1));
  return work;
}

template <typename T>
void ConvolutionLayer<T>::forward_image(const T* in, T* out, T* work, const T* weight) const {
  const int64_t m = group_out_channels(), k = group_unfolded_rows(), pixels = out_pixels();
  const T* cols = unfold(in, work);
  for (int64_t g = 0; g < group_; ++g)
    blas::gemm(false, false, m, pixels, k, T(1), weight + g * m * k, cols + g * k * pixels, T(0),
               out + g * m * pixels);
  // Bias and ReLU go while this image's output is still in cache.
  if (bias_term_ && !folds_bias()) {
    const T* bias = this->params_[1]->data();
    for (int64_t c = 0; c < num_output_; ++c) {
      T* row = out + c * pixels;
      for (int64_t i = 0; i < pixels; ++i) row[i] += bias[c];
    }
  }
  if (relu_forward_) {
    const int64_t n = num_output_ * pixels;
    // A select (std::max compiles to a branch around the store here) that keeps a NaN, as the
    // ReLU layer does: a diverged run shows as one.
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = out[i] < T(0) ? T(0) : out[i];
  }
}

template <typename T>
void ConvolutionLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                      const BlobVec<T>& top) {
  const int64_t images = bottom[0]->shape(0);
  OneDnnConvolution* conv = onednn(images, bottom[0]->channel_block(), top[0]->channel_block());
  const bool rounds = !multiplies_bf16(conv);  // no 16-bit kernel: round for the fp32 one
  const T* in =
      rounds ? operand(Operand::kInput, bottom[0]->data(), bottom[0]->count()) : bottom[0]->data();
  const T* weight =
      rounds ? operand(Operand::kWeight, this->params_[0]->data(), this->params_[0]->count())
             : this->params_[0]->data();
#ifdef CGDP_HAVE_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (conv)
      return conv->forward(in, weight, bias_term_ ? this->params_[1]->data() : nullptr,
                           top[0]->mutable_data());
  }
#endif
  const int threads = image_threads(images);
  T* work = work_buffer(threads);
  weight = gemm_weights(weight);
  const int64_t in_size = bottom[0]->count(1), out_size = top[0]->count(1);
  T* out = top[0]->mutable_data();
  for_each_image(images, threads, [&](int64_t n, int t) {
    forward_image(in + n * in_size, out + n * out_size, work + t * work_count(), weight);
  });
}

template <typename T>
void ConvolutionLayer<T>::backward_image(const T* in, const T* weight, const T* out, T* out_diff,
                                         const std::array<T*, 2>& param_diff, T* in_diff,
                                         T* work) const {
  const int64_t m = group_out_channels(), k = group_col_rows(), pixels = out_pixels();
  if (out) relu_gradient(out, out_diff, out_diff, num_output_ * pixels);  // the absorbed ReLU
  if (bias_term_ && !folds_bias())  // summed while this image's output gradient is in cache
    for (int64_t c = 0; c < num_output_; ++c) {
      const T* row = out_diff + c * pixels;
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < pixels; ++i) sum += row[i];
      param_diff[1][c] += sum;
    }
  const T* cols = unfold(in, work);
  const int64_t rows = group_unfolded_rows();
  for (int64_t g = 0; g < group_; ++g)
    blas::gemm(false, true, m, rows, pixels, T(1), out_diff + g * m * pixels,
               cols + g * rows * pixels, T(1), param_diff[0] + g * m * rows);
  if (!in_diff) return;
  // With a pointwise kernel the column gradient is the input gradient itself.
  const bool unfolded = !geometry_.is_pointwise();
  T* col_diff = unfolded ? work : in_diff;
  for (int64_t g = 0; g < group_; ++g)
    blas::gemm(true, false, k, pixels, m, T(1), weight + g * m * k, out_diff + g * m * pixels, T(0),
               col_diff + g * k * pixels);
  if (unfolded) col2im(work, geometry_, in_diff, work + unfolded_rows() * pixels);
}

template <typename T>
void ConvolutionLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                       const std::vector<bool>& propagate_down,
                                       const BlobVec<T>& bottom) {
  const int64_t images = bottom[0]->shape(0);
  OneDnnConvolution* conv = onednn(images, bottom[0]->channel_block(), top[0]->channel_block());
  const bool rounds = !multiplies_bf16(conv);
  // The input from the 16-bit copy the net kept of it, when it kept only that (the same bits).
  const uint16_t* packed_in = bottom[0]->packed_values();
  const T* in = rounds ? operand(Operand::kInput, bottom[0]->data(), bottom[0]->count(), packed_in)
                       : bottom[0]->data();
  const T* weight =
      rounds ? operand(Operand::kWeight, this->params_[0]->data(), this->params_[0]->count())
             : this->params_[0]->data();
  // The absorbed ReLU's backward from its output's 16-bit copy, when the net keeps only that;
  // else from the output, inside the passes below.
  const uint16_t* packed_out = relu_backward_ ? top[0]->packed_values() : nullptr;
  if (packed_out)
    relu_backward_from_packed(packed_out, top[0]->diff(), top[0]->mutable_diff(), top[0]->count(),
                              T(0));
  const T* out = relu_backward_ && !packed_out ? top[0]->data() : nullptr;
  // Rounding commutes with the absorbed ReLU's mask, so it may come first.
  if (rounds) round_in_place(top[0]->mutable_diff(), top[0]->count());
#ifdef CGDP_HAVE_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (conv)
      return conv->backward(
          in, weight, out, top[0]->mutable_diff(), this->params_[0]->mutable_diff(),
          bias_term_ ? this->params_[1]->mutable_diff() : nullptr,
          propagate_down[0] ? bottom[0]->mutable_diff() : nullptr, rounds ? nullptr : packed_in);
  }
#endif
  const int threads = image_threads(images);
  T* work = work_buffer(threads);
  // Unfolded, thread 0 accumulates straight into the parameter gradients and the others into
  // private copies (weights, then bias); folded, every thread into its own folded copy. The
  // copies are added at the end.
  const bool folded = folds_bias();
  const int64_t weight_count = this->params_[0]->count();
  const int64_t private_count =
      folded ? num_output_ * unfolded_rows() : weight_count + (bias_term_ ? num_output_ : 0);
  const int privates = folded ? threads : threads - 1;
  param_diff_.assign(static_cast<size_t>(privates * private_count), T(0));
  auto diffs_of = [&](int t) -> std::array<T*, 2> {
    if (folded) return {param_diff_.data() + t * private_count, nullptr};
    if (t == 0)
      return {this->params_[0]->mutable_diff(),
              bias_term_ ? this->params_[1]->mutable_diff() : nullptr};
    T* own = param_diff_.data() + (t - 1) * private_count;
    return {own, own + weight_count};
  };
  const int64_t in_size = bottom[0]->count(1), out_size = top[0]->count(1);
  T* out_diff = top[0]->mutable_diff();
  T* in_diff = propagate_down[0] ? bottom[0]->mutable_diff() : nullptr;
  for_each_image(images, threads, [&](int64_t n, int t) {
    backward_image(in + n * in_size, weight, out ? out + n * out_size : nullptr,
                   out_diff + n * out_size, diffs_of(t), in_diff ? in_diff + n * in_size : nullptr,
                   work + t * work_count());
  });
  if (folded) {
    for (int t = 1; t < threads; ++t)
      blas::axpy(private_count, T(1), diffs_of(t)[0], diffs_of(0)[0]);
    add_folded(diffs_of(0)[0]);
    return;
  }
  const std::array<T*, 2> total = diffs_of(0);
  for (int t = 1; t < threads; ++t) {
    const std::array<T*, 2> own = diffs_of(t);
    blas::axpy(weight_count, T(1), own[0], total[0]);
    if (bias_term_) blas::axpy(num_output_, T(1), own[1], total[1]);
  }
}

#ifdef CGDP_HAVE_ONEDNN
template <typename T>
OneDnnShape ConvolutionLayer<T>::onednn_shape(int64_t batch, int64_t src_block,
                                              int64_t dst_block) const {
  // bf16 kernels where the CPU has the instructions; elsewhere fp32 ones on rounded operands.
  OneDnnShape shape{batch,
                    geometry_,
                    num_output_,
                    group_,
                    bias_term_,
                    relu_forward_,
                    layer_precision() == Precision::kBf16 && cpu_has_bf16()};
  shape.src_block = src_block, shape.dst_block = dst_block;
  return shape;
}
#endif

template <typename T>
OneDnnConvolution* ConvolutionLayer<T>::onednn(int64_t batch, int64_t src_block,
                                               int64_t dst_block) {
#ifdef CGDP_HAVE_ONEDNN
  if (!use_onednn_) return nullptr;
  const OneDnnShape shape = onednn_shape(batch, src_block, dst_block);
  if (!onednn_ || !(onednn_->shape() == shape)) {
    onednn_ = OneDnnConvolution::create(shape);
    use_onednn_ = onednn_ != nullptr;  // no implementation for this shape: GEMM from now on
    // The GEMM path reads NCHW; the net chose the blocks from a kernel found at setup.
    if (!use_onednn_ && (src_block > 1 || dst_block > 1))
      this->fail(cat("oneDNN has no kernel for batch ", batch,
                     ", and the layer's blobs are in the channel blocks its setup chose; "
                     "run with --layout nchw"));
  }
  return onednn_.get();
#else
  (void)batch, (void)src_block, (void)dst_block;
  return nullptr;
#endif
}

template <typename T>
bool ConvolutionLayer<T>::multiplies_bf16(OneDnnConvolution* conv) const {
#ifdef CGDP_HAVE_ONEDNN
  return conv && conv->shape().bf16;
#else
  (void)conv;
  return false;
#endif
}

template <typename T>
const T* ConvolutionLayer<T>::gemm_weights(const T* weight) {
  if (!folds_bias()) return weight;
  const int64_t k = geometry_.col_rows(), rows = unfolded_rows();
  folded_weight_.resize(static_cast<size_t>(num_output_ * rows));
  const T* bias = this->params_[1]->data();
  for (int64_t o = 0; o < num_output_; ++o) {
    std::copy_n(weight + o * k, k, folded_weight_.data() + o * rows);
    folded_weight_[o * rows + k] = bias[o];
  }
  return folded_weight_.data();
}

template <typename T>
void ConvolutionLayer<T>::add_folded(const T* folded) {
  const int64_t k = geometry_.col_rows(), rows = unfolded_rows();
  T* weight_diff = this->params_[0]->mutable_diff();
  T* bias_diff = this->params_[1]->mutable_diff();
  for (int64_t o = 0; o < num_output_; ++o) {
    blas::axpy(k, T(1), folded + o * rows, weight_diff + o * k);
    bias_diff[o] += folded[o * rows + k];
  }
}

template class ConvolutionLayer<float>;
template class ConvolutionLayer<double>;

}  // namespace cgdp
