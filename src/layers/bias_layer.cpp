// Bias on the CPU: a learnable offset per slice of the chosen axes, its gradient summed in double.
#include "cgdp/layers/bias_layer.hpp"

#include <algorithm>

#include "cgdp/layers/filler.hpp"
#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void BiasLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  if (bottom.size() > 1) this->fail("the two-bottom form (the bias as a second input) is not implemented yet");
  const auto& p = this->param_.bias_param();
  const Shape& shape = bottom[0]->shape();
  axis_ = layer_axis(*this, shape, p.axis());
  if (p.num_axes() < -1) this->fail(cat("num_axes must be >= -1, got ", p.num_axes()));
  const int end = p.num_axes() == -1 ? static_cast<int>(shape.size()) : axis_ + p.num_axes();
  if (end > static_cast<int>(shape.size()))
    this->fail(cat("axis ", axis_, " + num_axes ", p.num_axes(), " exceeds the ", shape.size(), " axes of bottom shape ",
                   shape_string(shape)));
  fill(this->add_param(Shape(shape.begin() + axis_, shape.begin() + end)), p.filler(), rng);  // constant 0 unless told
}

template <typename T>
void BiasLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& shape = bottom[0]->shape();
  const Shape& bias_shape = this->params_[0]->shape();
  const int end = axis_ + static_cast<int>(bias_shape.size());
  if (end > static_cast<int>(shape.size()) || !std::equal(bias_shape.begin(), bias_shape.end(), shape.begin() + axis_))
    this->fail(cat("bottom shape ", shape_string(shape), " does not match bias shape ", shape_string(bias_shape),
                   " at axis ", axis_));
  outer_ = bottom[0]->count(0, axis_);
  dim_ = this->params_[0]->count();
  inner_ = bottom[0]->count(end);
  top[0]->reshape(shape);
}

template <typename T>
void BiasLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  const T* bias = this->params_[0]->data();
  T* y = top[0]->mutable_data();
  const int64_t rows = outer_ * dim_, inner = inner_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = r * inner; i < (r + 1) * inner; ++i) y[i] = x[i] + bias[r % dim_];
}

template <typename T>
void BiasLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                const BlobVec<T>& bottom) {
  const T* dy = top[0]->diff();
  T* bias_diff = this->params_[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t d = 0; d < dim_; ++d) {
    double sum = 0;
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = (o * dim_ + d) * inner_; i < (o * dim_ + d + 1) * inner_; ++i) sum += dy[i];
    bias_diff[d] += static_cast<T>(sum);
  }
  if (propagate_down[0] && top[0] != bottom[0]) std::copy(dy, dy + top[0]->count(), bottom[0]->mutable_diff());
}

template class BiasLayer<float>;
template class BiasLayer<double>;

}  // namespace cgdp
