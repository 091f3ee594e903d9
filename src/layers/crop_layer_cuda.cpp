// Crop on CUDA: kernels/crop.cu, with the shapes and offsets passed by value.
#include "cgdp/layers/crop_layer.hpp"
#include "crop.cuh"
#include "cuda_layer.hpp"

namespace cgdp {

namespace {

template <typename T>
kernels::CropGeometry geometry(const Layer<T>& layer, const Shape& top, const Shape& in, const std::vector<int64_t>& offsets) {
  if (top.size() > static_cast<size_t>(kernels::kMaxCropAxes))
    throw_layer_error<DeviceError>(layer, cat("crops at most ", kernels::kMaxCropAxes, " axes on CUDA, got ", top.size()));
  kernels::CropGeometry g;
  g.axes = static_cast<int>(top.size());
  for (size_t a = 0; a < top.size(); ++a) g.top[a] = top[a], g.in[a] = in[a], g.offset[a] = offsets[a];
  return g;
}

}  // namespace

template <typename T>
void CropLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  kernels::crop_forward(bottom[0]->data(), geometry(*this, top[0]->shape(), bottom[0]->shape(), offsets_), top[0]->count(),
                        top[0]->mutable_data(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void CropLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  kernels::crop_backward(top[0]->diff(), geometry(*this, top[0]->shape(), bottom[0]->shape(), offsets_), top[0]->count(),
                         bottom[0]->count(), bottom[0]->mutable_diff(), native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_LAYER(CropLayer)

}  // namespace cgdp
