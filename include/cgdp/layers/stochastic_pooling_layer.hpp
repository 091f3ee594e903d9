// Stochastic pooling (Zeiler & Fergus; Caffe's pool: STOCHASTIC, which has it on the GPU only):
// in training each window outputs one of its inputs, drawn with probability proportional to its
// value (inputs are non-negative, as after a ReLU), and backward routes the gradient there; in
// testing a window outputs sum(x^2) / sum(x), whose gradient cgdp gives too (Caffe has none). Draws come from (seed, layer, iteration, sample,
// position), so any split of a batch draws the same. Windows as Caffe's pooling, without padding.
#pragma once

#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class StochasticPoolingLayer final : public Layer<T> {
 public:
  StochasticPoolingLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

  struct Geometry {
    int64_t planes = 0, height = 0, width = 0, pooled_h = 0, pooled_w = 0;
    int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1;
  };

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                    const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                     const BlobVec<T>& bottom) override;
#endif

 private:
  uint64_t name_hash_;
  Geometry g_;
  int64_t channels_ = 0;
  Blob<T> chosen_;  // training: the index (h * W + w) in its plane each output took; testing: the window's sum
};

}  // namespace cgdp
