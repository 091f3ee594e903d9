// Eltwise: element-wise SUM (with optional per-bottom coeff), PROD or MAX of two or more bottoms of
// the same shape, with Caffe's backward (PROD: product of the other bottoms; MAX: to the winner).
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class EltwiseLayer final : public Layer<T> {
 public:
  EltwiseLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return -1; }
  // Each element alike and alone: any layout, the same on all its blobs.
  bool handles_channel_block(bool, int64_t) const override { return true; }
  // SUM and MAX backward read only the top's gradient (and MAX its winners); PROD the values.
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return op_ == proto::EltwiseParameter::PROD;
  }
  // Writes the result over bottom k's values (the top aliases them): the net asks when no later
  // layer and no backward reads that bottom. Before setup.
  void write_over_bottom(int k) { written_over_ = k; }

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  using Op = proto::EltwiseParameter::EltwiseOp;
  Op op_ = proto::EltwiseParameter::SUM;
  std::vector<T> coeff_;
  Blob<T> max_index_;  // MAX: which bottom won each element (small integers, exact in T)
  int written_over_ = -1;  // write_over_bottom
};

}  // namespace cgdp
