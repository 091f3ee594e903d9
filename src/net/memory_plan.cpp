// Activation gradients by liveness (the "memonger" idea of Caffe2 and MXNet, done on offsets into
// one buffer). The backward pass runs the layers last to first; a blob's gradient is touched only
// by the backwards of the layers that read or write the blob, so it is alive from the last of
// those layers to the first. Gradients alive in disjoint stretches take the same bytes. A chain
// of layers then needs about two activations' gradients at a time instead of all of them. A net
// that plans its values too moves the gradients into their arena (activation_arena.cpp). An
// Eltwise may also write its values over a bottom that nothing reads any more (reuse_dead_bottom).
#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "cgdp/layers/eltwise_layer.hpp"
#include "cgdp/net/liveness.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {

namespace {

constexpr int64_t kAlignElements = 64;  // 256 bytes of float: what cuDNN and vector loads like

}  // namespace

template <typename T>
std::vector<typename Net<T>::GradientSpan> Net<T>::gradient_spans() const {
  // Left out, keeping gradients of their own: loss tops (their gradient holds the loss weight,
  // set once) and blobs no backward writes (their gradient must stay zero for layers that read it).
  std::set<const Blob<T>*> written, own;
  for (int i = 0; i < num_layers(); ++i) {
    for (size_t j = 0; j < tops_[i].size(); ++j)
      if (loss_weights_[i][j] != 0.f) own.insert(tops_[i][j]);
    if (!needs_backward_[i] || absorbed_[i]) continue;
    for (size_t j = 0; j < bottoms_[i].size(); ++j)
      if (propagate_down_[i][j]) written.insert(bottoms_[i][j]);
  }
  // In the order the layers first touch them, not by address: plans must not change between runs.
  std::vector<GradientSpan> touched;
  std::map<const Blob<T>*, size_t> index;
  for (int i = 0; i < num_layers(); ++i)
    for (const BlobVec<T>* blobs : {&bottoms_[i], &tops_[i]})
      for (Blob<T>* b : *blobs) {
        const auto [it, fresh] = index.try_emplace(b, touched.size());
        if (fresh) touched.push_back({b, i, i});
        touched[it->second].last = i;  // layers come in order: the first stays, the last moves on
      }
  std::vector<GradientSpan> spans;
  for (const GradientSpan& span : touched)
    if (span.blob->has_diff() && span.blob->count() > 0 && written.count(span.blob) &&
        !own.count(span.blob))
      spans.push_back(span);
  share_in_place_gradients(spans);
  return spans;
}

// A layer that writes its input's gradient over its output's (Layer::gradient_in_place): the
// output's span takes the input's blob and stretch, and the input's goes.
template <typename T>
void Net<T>::share_in_place_gradients(std::vector<GradientSpan>& spans) const {
  // A span that took another's already is left alone: no chains of shared places.
  const auto span_of = [&](const Blob<T>* b) {
    return std::find_if(spans.begin(), spans.end(),
                        [b](const GradientSpan& s) { return s.blob == b && !s.shared; });
  };
  for (int i = 0; i < num_layers(); ++i) {
    if (!needs_backward_[i] || absorbed_[i] || !layers_[i]->gradient_in_place() ||
        bottoms_[i].size() != 1 || tops_[i].size() != 1 || !propagate_down_[i][0])
      continue;
    Blob<T>* bottom = bottoms_[i][0];
    const Blob<T>* top = tops_[i][0];
    const auto out = span_of(top), in = span_of(bottom);
    if (bottom == top || bottom->count() != top->count() || out == spans.end() || in == spans.end())
      continue;
    out->first = std::min(out->first, in->first);
    out->last = std::max(out->last, in->last);
    out->shared = bottom;
    spans.erase(in);
  }
}

template <typename T>
std::set<const Blob<T>*> Net<T>::blobs_with_gradients() const {
  std::set<const Blob<T>*> blobs;
  for (int i = 0; i < num_layers(); ++i) {
    if (!needs_backward_[i]) continue;
    blobs.insert(tops_[i].begin(), tops_[i].end());
    for (size_t j = 0; j < bottoms_[i].size(); ++j)
      if (propagate_down_[i][j]) blobs.insert(bottoms_[i][j]);
  }
  return blobs;
}

template <typename T>
void Net<T>::plan_activation_gradients() {
  std::vector<GradientSpan> spans = gradient_spans();
  const auto size = [](const GradientSpan& s) {  // elements, rounded up to kAlignElements
    return (s.blob->count() + kAlignElements - 1) / kAlignElements * kAlignElements;
  };
  // Largest first, as in offset planners: the big gradients settle the layout, small ones fill gaps.
  std::stable_sort(spans.begin(), spans.end(), [&](const GradientSpan& a, const GradientSpan& b) {
    return size(a) != size(b) ? size(a) > size(b) : a.first < b.first;
  });
  std::vector<Occupant> occupants;  // liveness.hpp places them, in the order sorted above
  for (const GradientSpan& span : spans)
    occupants.push_back(
        {{{span.first, span.last}}, size(span) * static_cast<int64_t>(sizeof(T)), 0});
  std::vector<Occupant*> order;
  for (Occupant& o : occupants) order.push_back(&o);
  const int64_t total =
      place_by_liveness(order, kAlignElements * sizeof(T)) / static_cast<int64_t>(sizeof(T));
  activation_diffs_ = DeviceBuffer(*device_, static_cast<size_t>(total) * sizeof(T));
  T* base = static_cast<T*>(activation_diffs_.get());
  for (size_t k = 0; k < spans.size(); ++k) {
    const int64_t offset = occupants[k].offset / static_cast<int64_t>(sizeof(T));
    for (Blob<T>* blob : {spans[k].blob, spans[k].shared})
      if (blob) {
        blob->bind_diff(base + offset);
        activation_diff_offsets_.emplace_back(blob, offset);
      }
  }
}

// An Eltwise SUM or MAX may write its result over a bottom whose values nothing reads later: no
// later forward (the Eltwise is the blob's last layer) and no backward (every layer on the blob
// says so). ResNet's residual sums then keep no output of their own, like PyTorch's
// `out += identity`, one activation per block.
template <typename T>
void Net<T>::reuse_dead_bottom(int i, const proto::LayerParameter& lp, const std::map<std::string, int>& last_touch) {
  if (lp.eltwise_param().operation() == proto::EltwiseParameter::PROD) return;
  const BlobVec<T>& bottom = bottoms_[i];
  for (size_t k = 0; k < bottom.size(); ++k) {
    Blob<T>* b = bottom[k];
    if (b == tops_[i][0] || b->data_is_aliased() || last_touch.at(lp.bottom(static_cast<int>(k))) != i ||
        std::count(bottom.begin(), bottom.end(), b) > 1)
      continue;
    bool read = false;
    for (int j = 0; j < i && !read; ++j) {
      const bool touches = std::count(bottoms_[j].begin(), bottoms_[j].end(), b) ||
                           std::count(tops_[j].begin(), tops_[j].end(), b);
      read = touches && layers_[j]->backward_reads(*b, bottoms_[j], tops_[j]);
    }
    if (read) continue;
    static_cast<EltwiseLayer<T>&>(*layers_[i]).write_over_bottom(static_cast<int>(k));
    written_over_.insert(b);
    return;
  }
}

template std::vector<Net<float>::GradientSpan> Net<float>::gradient_spans() const;
template void Net<float>::share_in_place_gradients(std::vector<GradientSpan>&) const;
template void Net<double>::share_in_place_gradients(std::vector<GradientSpan>&) const;
template std::vector<Net<double>::GradientSpan> Net<double>::gradient_spans() const;
template std::set<const Blob<float>*> Net<float>::blobs_with_gradients() const;
template std::set<const Blob<double>*> Net<double>::blobs_with_gradients() const;
template void Net<float>::plan_activation_gradients();
template void Net<double>::plan_activation_gradients();
template void Net<float>::reuse_dead_bottom(int, const proto::LayerParameter&, const std::map<std::string, int>&);
template void Net<double>::reuse_dead_bottom(int, const proto::LayerParameter&, const std::map<std::string, int>&);

}  // namespace cgdp
