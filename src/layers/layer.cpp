// Layer base: argument checks and backend dispatch shared by every layer type.
#include "cgdp/layers/layer.hpp"

#include <algorithm>

namespace cgdp {

namespace {

bool count_ok(int n, int lo, int hi) { return n >= lo && (hi < 0 || n <= hi); }

std::string expected_count(int lo, int hi) {
  if (hi < 0) return cat("at least ", lo);
  return lo == hi ? std::to_string(lo) : cat(lo, " to ", hi);
}

}  // namespace

template <typename T>
void Layer<T>::setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) {
  const int nb = static_cast<int>(bottom.size()), nt = static_cast<int>(top.size());
  if (!count_ok(nb, min_bottoms(), max_bottoms()))
    fail(cat("takes ", expected_count(min_bottoms(), max_bottoms()), " bottom(s), got ", nb));
  if (!count_ok(nt, min_tops(), max_tops()))
    fail(cat("produces ", expected_count(min_tops(), max_tops()), " top(s), got ", nt));
  for (int j = 0; j < std::min(nb, nt); ++j)
    if (top[j] == bottom[j] && !can_run_in_place())
      fail(cat("cannot run in place: its top ", j, " is its bottom ", j,
               " (Caffe refuses this too; give the top a name of its own)"));
  try {
    layer_setup(bottom, top, rng);
    reshape(bottom, top);
  } catch (const ModelError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
}

template <typename T>
void Layer<T>::forward(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  if (device_->kind() == DeviceKind::Cpu) {
    forward_cpu(ctx, bottom, top);
  } else {
    forward_cuda(ctx, bottom, top);
  }
}

template <typename T>
void Layer<T>::backward(const RunContext& ctx, const BlobVec<T>& top,
                        const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (device_->kind() == DeviceKind::Cpu) {
    backward_cpu(ctx, top, propagate_down, bottom);
  } else {
    backward_cuda(ctx, top, propagate_down, bottom);
  }
}

template <typename T>
void Layer<T>::forward_cuda(const RunContext&, const BlobVec<T>&, const BlobVec<T>&) {
  fail("has no CUDA implementation yet");
}

template <typename T>
void Layer<T>::backward_cuda(const RunContext&, const BlobVec<T>&, const std::vector<bool>&,
                             const BlobVec<T>&) {
  fail("has no CUDA implementation yet");
}

template <typename T>
void Layer<T>::fail(const std::string& what) const {
  throw ModelError(cat("layer '", name(), "' (", type(), "): ", what));
}

template <typename T>
Blob<T>& Layer<T>::add_param(const Shape& shape) {
  params_.push_back(std::make_unique<Blob<T>>(*device_, Shape{0}));  // no memory yet
  if (defer_param_gradients_) {  // the net binds them to its flat buffers (or the train net's)
    params_.back()->defer_diff();
    params_.back()->hold_values_on_host();
  }
  params_.back()->reshape(shape);
  return *params_.back();
}

template <typename T>
Blob<T>& Layer<T>::add_state(const Shape& shape) {
  state_.push_back(std::make_unique<Blob<T>>(*device_, shape, Diff::None));  // statistics: no gradient
  return *state_.back();
}

template class Layer<float>;
template class Layer<double>;

}  // namespace cgdp
