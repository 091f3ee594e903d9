// ArgMax on the CPU: a partial sort per row, as Caffe's.
#include "cgdp/layers/argmax_layer.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void ArgMaxLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const auto& p = this->param_.argmax_param();
  const Shape& in = bottom[0]->shape();
  g_ = {};
  g_.top_k = p.top_k();
  g_.has_axis = p.has_axis();
  g_.out_max_val = p.out_max_val();
  if (g_.top_k < 1) this->fail("top_k must be at least 1");
  Shape shape(std::max<size_t>(in.size(), 3), 1);
  if (g_.has_axis) {
    const int axis = layer_axis(*this, in, p.axis());
    g_.dim = in[axis];
    g_.stride = bottom[0]->count(axis + 1);
    shape = in;
    shape[axis] = g_.top_k;
  } else {
    if (in.empty()) this->fail("needs a bottom with a first (sample) axis");
    g_.dim = bottom[0]->count(1);
    shape[0] = in[0];
    shape[2] = g_.top_k;
    if (g_.out_max_val) shape[1] = 2;
  }
  if (g_.top_k > g_.dim) this->fail(cat("top_k ", g_.top_k, " is more than the ", g_.dim, " values each row has"));
  g_.rows = g_.dim > 0 ? bottom[0]->count() / g_.dim : 0;
  top[0]->reshape(shape);
}

template <typename T>
void ArgMaxLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const Geometry g = g_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < g.rows; ++i) {
    std::vector<std::pair<T, int64_t>> row(static_cast<size_t>(g.dim));
    for (int64_t j = 0; j < g.dim; ++j) row[j] = {x[(i / g.stride * g.dim + j) * g.stride + i % g.stride], j};
    std::partial_sort(row.begin(), row.begin() + g.top_k, row.end(), std::greater<std::pair<T, int64_t>>());
    for (int64_t j = 0; j < g.top_k; ++j) {
      const int64_t along = (i / g.stride * g.top_k + j) * g.stride + i % g.stride;
      if (!g.has_axis && g.out_max_val) {
        y[2 * i * g.top_k + j] = static_cast<T>(row[j].second);
        y[2 * i * g.top_k + g.top_k + j] = row[j].first;
      } else {
        y[along] = g.out_max_val ? row[j].first : static_cast<T>(row[j].second);
      }
    }
  }
}

template class ArgMaxLayer<float>;
template class ArgMaxLayer<double>;

}  // namespace cgdp
