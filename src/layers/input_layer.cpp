// Input layer: shapes only; the trainer copies each batch into its tops.
#include "cgdp/layers/input_layer.hpp"

namespace cgdp {

template <typename T>
Shape InputLayer<T>::declared_shape(int top_index) const {
  const auto& p = this->param_.input_param();
  const int shapes = p.shape_size();
  if (shapes == 0) this->fail("input_param needs a shape { dim: ... } for its tops");
  const auto& s = p.shape(shapes == 1 ? 0 : top_index);
  return Shape(s.dim().begin(), s.dim().end());
}

template <typename T>
void InputLayer<T>::reshape(const BlobVec<T>&, const BlobVec<T>& top) {
  const int shapes = this->param_.input_param().shape_size();
  if (shapes != 1 && shapes != static_cast<int>(top.size()))
    this->fail(cat("input_param has ", shapes, " shapes for ", top.size(),
                   " tops; give one shape, or one per top"));
  for (size_t i = 0; i < top.size(); ++i) {
    Shape shape = declared_shape(static_cast<int>(i));
    if (shape.empty()) this->fail(cat("top '", this->param_.top(i), "' has an empty shape"));
    if (batch_ > 0) shape[0] = batch_;
    for (int64_t d : shape)
      if (d <= 0) this->fail(cat("shape ", shape_string(shape), " has a dimension <= 0"));
    top[i]->reshape(shape);
  }
}

template class InputLayer<float>;
template class InputLayer<double>;

}  // namespace cgdp
