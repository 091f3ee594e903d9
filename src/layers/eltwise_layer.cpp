// Eltwise layer: SUM, PROD and MAX over any number of same-shaped bottoms.
#include "cgdp/layers/eltwise_layer.hpp"

namespace cgdp {

namespace {

template <typename T>
std::vector<const T*> data_pointers(const BlobVec<T>& blobs) {
  std::vector<const T*> data;
  for (const Blob<T>* b : blobs) data.push_back(b->data());
  return data;
}

}  // namespace

template <typename T>
EltwiseLayer<T>::EltwiseLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), max_index_(device, Shape{}, Diff::None) {}

template <typename T>
void EltwiseLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.eltwise_param();
  op_ = p.operation();
  const int n = p.coeff_size(), bottoms = static_cast<int>(bottom.size());
  if (n > 0 && op_ != proto::EltwiseParameter::SUM)
    this->fail("takes coeff only for operation SUM");
  if (n > 0 && n != bottoms)
    this->fail(cat("has ", n, " coeff for ", bottoms, " bottoms; give one per bottom or none"));
  coeff_.assign(bottoms, T(1));
  for (int i = 0; i < n; ++i) coeff_[i] = static_cast<T>(p.coeff(i));
}

template <typename T>
void EltwiseLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  for (size_t i = 1; i < bottom.size(); ++i)
    if (bottom[i]->shape() != bottom[0]->shape())
      this->fail(cat("bottom ", i, " has shape ", shape_string(bottom[i]->shape()),
                     " but bottom 0 has shape ", shape_string(bottom[0]->shape()),
                     "; all bottoms must have the same shape"));
  if (written_over_ >= 0)
    top[0]->alias_data(*bottom[written_over_]);  // each element is read before it is written
  else
    top[0]->reshape_like(*bottom[0]);
  if (op_ == proto::EltwiseParameter::MAX) max_index_.reshape_like(*bottom[0]);
}

template <typename T>
void EltwiseLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) {
  const int64_t n = top[0]->count();
  const int bottoms = static_cast<int>(bottom.size());
  const std::vector<const T*> x = data_pointers(bottom);
  T* y = top[0]->mutable_data();
  T* winner = max_index_.mutable_data();
  const Op op = op_;
  const T* coeff = coeff_.data();
  // A residual join: a loop that vectorises.
  if (op == proto::EltwiseParameter::SUM && bottoms == 2) {
    const T *x0 = x[0], *x1 = x[1];
    const T c0 = coeff[0], c1 = coeff[1];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      T acc = c0 * x0[i];
      acc += c1 * x1[i];
      y[i] = acc;
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T acc = op == proto::EltwiseParameter::SUM ? coeff[0] * x[0][i] : x[0][i];
    int best = 0;
    for (int b = 1; b < bottoms; ++b) {
      const T v = x[b][i];
      if (op == proto::EltwiseParameter::SUM) {
        acc += coeff[b] * v;
      } else if (op == proto::EltwiseParameter::PROD) {
        acc *= v;
      } else if (v > acc) {  // MAX: ties go to the earlier bottom, as in Caffe
        acc = v;
        best = b;
      }
    }
    y[i] = acc;
    if (op == proto::EltwiseParameter::MAX) winner[i] = static_cast<T>(best);
  }
}

template <typename T>
void EltwiseLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  const int64_t n = top[0]->count();
  const int bottoms = static_cast<int>(bottom.size());
  const std::vector<const T*> x = data_pointers(bottom);
  const T* dy = top[0]->diff();
  for (int b = 0; b < bottoms; ++b) {
    if (!propagate_down[b]) continue;
    T* dx = bottom[b]->mutable_diff();
    if (op_ == proto::EltwiseParameter::SUM) {
      const T c = coeff_[b];
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = c * dy[i];
    } else if (op_ == proto::EltwiseParameter::PROD) {
      // The product of the other bottoms (Caffe's stable_prod_grad): no division by zero.
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        T others = 1;
        for (int k = 0; k < bottoms; ++k)
          if (k != b) others *= x[k][i];
        dx[i] = dy[i] * others;
      }
    } else {
      const T* winner = max_index_.data();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = winner[i] == static_cast<T>(b) ? dy[i] : T(0);
    }
  }
}

template class EltwiseLayer<float>;
template class EltwiseLayer<double>;

}  // namespace cgdp
