// Accuracy layer: Caffe's top-k rule (a class tied with the label's score ranks above it).
#include "cgdp/layers/accuracy_layer.hpp"

namespace cgdp {

template <typename T>
void AccuracyLayer<T>::layer_setup(const BlobVec<T>&, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.accuracy_param();
  if (p.top_k() < 1) this->fail("top_k must be >= 1");
  if (p.has_ignore_label()) ignore_label_ = p.ignore_label();
}

template <typename T>
void AccuracyLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  ca_ = class_axis(*this, *bottom[0], this->param_.accuracy_param().axis(), *bottom[1]);
  const int64_t top_k = this->param_.accuracy_param().top_k();
  if (top_k > ca_.classes)
    this->fail(cat("top_k ", top_k, " exceeds the ", ca_.classes, " classes of bottom shape ",
                   shape_string(bottom[0]->shape())));
  top[0]->reshape({});
}

template <typename T>
void AccuracyLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom,
                                   const BlobVec<T>& top) {
  const T* score = bottom[0]->data();
  const T* label = bottom[1]->data();
  const int64_t top_k = this->param_.accuracy_param().top_k();
  const int64_t classes = ca_.classes, inner = ca_.inner;
  int64_t correct = 0, counted = 0;
  for (int64_t pos = 0; pos < ca_.outer * inner; ++pos) {
    const int64_t l = class_label(*this, ca_, label, pos, ignore_label_, ctx.sample_offset);
    if (l < 0) continue;
    const T* s = score + pos / inner * classes * inner + pos % inner;
    const T target = s[l * inner];
    int64_t at_least_as_good = 0;  // includes the label itself
    // !(a < b), not a >= b: a NaN score ranks above the label, so a row holding NaN is never
    // correct (NaN weights had reported "test accuracy 1").
    for (int64_t c = 0; c < classes; ++c) at_least_as_good += !(s[c * inner] < target);
    correct += at_least_as_good <= top_k;
    ++counted;
  }
  top[0]->mutable_data()[0] =
      counted ? static_cast<T>(static_cast<double>(correct) / counted) : T(0);
}

template class AccuracyLayer<float>;
template class AccuracyLayer<double>;

}  // namespace cgdp
