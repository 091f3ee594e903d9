// Reshape and Flatten: the same elements under another shape. The top holds a copy (cgdp's tops
// own their memory), so forward copies the data and backward the gradient, on either backend.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class ShapeOnlyLayer : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;  // it copies the gradient back
  }

 protected:
  // The top's shape for `bottom`; ModelError (naming the layer) when the counts cannot match.
  virtual Shape top_shape(const Shape& bottom) const = 0;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) final;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) final;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) final;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) final;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) final;
#endif
};

// Caffe's Reshape: axes [axis, axis + num_axes) of the bottom (all with num_axes -1) become
// reshape_param.shape, where 0 copies the bottom's dimension at that place and one -1 is inferred.
template <typename T>
class ReshapeLayer final : public ShapeOnlyLayer<T> {
 public:
  using ShapeOnlyLayer<T>::ShapeOnlyLayer;

 protected:
  Shape top_shape(const Shape& bottom) const override;
};

// Caffe's Flatten: axes axis..end_axis (default 1..-1) become one.
template <typename T>
class FlattenLayer final : public ShapeOnlyLayer<T> {
 public:
  using ShapeOnlyLayer<T>::ShapeOnlyLayer;

 protected:
  Shape top_shape(const Shape& bottom) const override;
};

}  // namespace cgdp
