// MVN on the CPU: per-row means and variances in double; Caffe's backward.
#include "cgdp/layers/mvn_layer.hpp"

#include <cmath>

namespace cgdp {

template <typename T>
void MVNLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& in = bottom[0]->shape();
  if (in.size() < 2) this->fail(cat("needs a bottom with samples and channels, got ", shape_string(in)));
  const bool across = this->param_.mvn_param().across_channels();
  rows_ = across ? in[0] : in[0] * in[1];
  dim_ = rows_ > 0 ? bottom[0]->count() / rows_ : 0;
  scale_ = std::make_unique<Blob<T>>(this->device(), Shape{rows_}, Diff::None);
  top[0]->reshape(in);
}

template <typename T>
void MVNLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const auto& p = this->param_.mvn_param();
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  T* scale = scale_->mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows_; ++r) {
    const T* xr = x + r * dim_;
    T* yr = y + r * dim_;
    double sum = 0;
    for (int64_t i = 0; i < dim_; ++i) sum += xr[i];
    const T mean = static_cast<T>(sum / dim_);
    double squares = 0;
    for (int64_t i = 0; i < dim_; ++i) {
      yr[i] = xr[i] - mean;
      squares += static_cast<double>(yr[i]) * yr[i];
    }
    scale[r] = p.normalize_variance() ? static_cast<T>(std::sqrt(squares / dim_) + p.eps()) : T(1);
    for (int64_t i = 0; i < dim_; ++i) yr[i] /= scale[r];
  }
}

template <typename T>
void MVNLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                               const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const bool variance = this->param_.mvn_param().normalize_variance();
  const T* y = top[0]->data();
  const T* dy = top[0]->diff();
  const T* scale = scale_->data();
  T* dx = bottom[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows_; ++r) {
    const T* yr = y + r * dim_;
    const T* dyr = dy + r * dim_;
    T* dxr = dx + r * dim_;
    double sum_dy = 0, sum_ydy = 0;
    for (int64_t i = 0; i < dim_; ++i) {
      sum_dy += dyr[i];
      sum_ydy += static_cast<double>(yr[i]) * dyr[i];
    }
    const T mean_dy = static_cast<T>(sum_dy / dim_), mean_ydy = static_cast<T>(sum_ydy / dim_);
    for (int64_t i = 0; i < dim_; ++i)
      dxr[i] = variance ? (dyr[i] - mean_dy - yr[i] * mean_ydy) / scale[r] : dyr[i] - mean_dy;
  }
}

template class MVNLayer<float>;
template class MVNLayer<double>;

}  // namespace cgdp
