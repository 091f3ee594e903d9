// Net construction (wiring, backward analysis, flat parameter buffers) and the layer-by-layer
// passes.
#include "cgdp/net/net.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/layers/scale_layer.hpp"
#include "cgdp/layers/split_layer.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/wiring_check.hpp"

namespace cgdp {

template <typename T>
Net<T>::Net(const proto::NetParameter& param, Phase phase, Device& device, int64_t batch_size,
            uint64_t seed, const std::string& source, ActivationMemory memory, Net* params_from,
            const std::vector<std::string>& streamed_weights)
    : name_(param.name()),
      phase_(phase),
      device_(&device),
      batch_override_(batch_size),
      memory_(memory) {
  const proto::NetParameter phase_net = filter_phase(param, phase);
  check_wiring(phase_net, source);
  build(insert_splits(phase_net, source), seed, source, params_from, streamed_weights);
}

namespace {

// Blob name -> the last layer that writes a blob of that name in place.
std::map<std::string, int> last_in_place_writers(const proto::NetParameter& param) {
  std::map<std::string, int> last;
  for (int i = 0; i < param.layer_size(); ++i)
    for (int j = 0; j < std::min(param.layer(i).bottom_size(), param.layer(i).top_size()); ++j)
      if (param.layer(i).bottom(j) == param.layer(i).top(j)) last[param.layer(i).top(j)] = i;
  return last;
}

// Blob name -> the last layer that reads or writes it.
std::map<std::string, int> last_touches(const proto::NetParameter& param) {
  std::map<std::string, int> last;
  for (int i = 0; i < param.layer_size(); ++i)
    for (const auto* names : {&param.layer(i).bottom(), &param.layer(i).top()})
      for (const std::string& name : *names) last[name] = i;
  return last;
}

// Whether a layer after `index` writes in place a blob named as one of `lp`'s bottoms or tops
// (then a Split must copy its values rather than share them).
bool written_in_place_after(const proto::LayerParameter& lp, int index, const std::map<std::string, int>& last) {
  for (const auto* names : {&lp.bottom(), &lp.top()})
    for (const std::string& name : *names)
      if (const auto it = last.find(name); it != last.end() && it->second > index) return true;
  return false;
}

}  // namespace

template <typename T>
void Net<T>::build(const proto::NetParameter& param, uint64_t seed, const std::string& source,
                   Net* params_from, const std::vector<std::string>& streamed) {
  Rng rng(seed);
  const std::map<std::string, int> last_in_place = last_in_place_writers(param);
  const std::map<std::string, int> last_touch = last_touches(param);
  for (const auto& lp : param.layer()) {
    wire_layer(lp, source);
    const int i = num_layers() - 1;
    if (phase_ != Phase::Train) layers_[i]->set_forward_only();
    layers_[i]->defer_param_gradients();  // gather_params or share_params_from binds them
    if (memory_ == ActivationMemory::Planned)
      for (Blob<T>* kept : {layers_[i]->mutable_kept_top(), layers_[i]->mutable_kept_indices()})
        if (kept) kept->defer_memory();
    share_kept_input(i);
    if (auto* split = dynamic_cast<SplitLayer<T>*>(layers_[i].get()); split && !written_in_place_after(lp, i, last_in_place))
      split->share_bottom_data();
    if (phase_ == Phase::Train && lp.type() == "Eltwise") reuse_dead_bottom(i, lp, last_touch);
    try {
      layers_[i]->setup(bottoms_[i], tops_[i], rng);
    } catch (const ModelError& e) {
      throw ModelError(cat(located(source, lp), ": ", e.what()));
    } catch (const DataError& e) {
      throw ModelError(cat(located(source, lp), ": ", e.what()));
    }
    if (lp.param_size() > static_cast<int>(layers_[i]->params().size()))
      throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' gives ", lp.param_size(),
                           " param entries, but ", lp.type(), " learns ", layers_[i]->params().size(),
                           " blob(s) here"));
    for (size_t j = 0; j < tops_[i].size(); ++j)
      if (loss_weights_[i][j] != 0.f) {
        if (tops_[i][j]->count() != 1)
          throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "': loss top '",
                               lp.top(j), "' must be a scalar, got ",
                               shape_string(tops_[i][j]->shape())));
        const T weight = static_cast<T>(loss_weights_[i][j]);
        tops_[i][j]->allocate_deferred_diff();  // its own gradient: it holds the loss weight
        if (tops_[i][j]->has_diff()) device_->copy(tops_[i][j]->mutable_diff(), &weight, sizeof(T));
      }
  }
  if (!input_) throw ModelError(cat(source, ": the model has no Input layer"));
  check_saved_names(param, source);
  force_backward_ = param.force_backward();
  mark_backward();
  fuse_batch_norm_scales();
  absorb_relus();           // after: a Scale inside its BatchNorm hands the ReLU after it on
  choose_channel_blocks();  // after: an absorbed ReLU takes no part
  if (params_from)
    share_params_from(*params_from);
  else
    gather_params(source, streamed);
  if (phase_ == Phase::Train) plan_activation_gradients();
  const std::set<const Blob<T>*> with_gradients = blobs_with_gradients();
  for (auto& [name, blob] : blobs_)  // what the plan left to them
    if (with_gradients.count(blob.get()))
      blob->allocate_deferred_diff();
    else
      blob->drop_deferred_diff();
}

template <typename T>
void Net<T>::wire_layer(const proto::LayerParameter& lp, const std::string& source) {
  if (!lp.has_type())
    throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' has no type"));
  if (lp.propagate_down_size() > 0 && lp.propagate_down_size() != lp.bottom_size())
    throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' gives ", lp.propagate_down_size(),
                         " propagate_down for ", lp.bottom_size(), " bottoms; give one per bottom"));
  auto layer = [&] {
    try {
      return create_layer<T>(lp, *device_);
    } catch (const ModelError& e) {
      throw ModelError(cat(located(source, lp), ": ", e.what()));
    }
  }();
  BlobVec<T> bottoms, tops;
  for (const auto& name : lp.bottom()) {
    auto it = latest_.find(name);
    if (it == latest_.end())
      throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "': bottom '", name,
                           "' is not produced by any earlier layer"));
    bottoms.push_back(it->second);
  }
  for (int j = 0; j < lp.top_size(); ++j) {
    const std::string& name = lp.top(j);
    if (j < lp.bottom_size() && lp.bottom(j) == name) {
      tops.push_back(bottoms[j]);  // in place, as Caffe's ReLU/Dropout/BatchNorm/Scale
    } else {
      auto blob = std::make_unique<Blob<T>>(*device_, Shape{}, phase_ == Phase::Train ? Diff::Kept : Diff::None);
      if (memory_ == ActivationMemory::Planned)
        blob->defer_memory();
      else
        blob->defer_diff();
      tops.push_back(blob.get());
      blobs_[cat(name, "#", layers_.size())] = std::move(blob);
    }
    latest_[name] = tops.back();
  }
  if (auto* input = dynamic_cast<InputLayer<T>*>(layer.get()); input && !input_) {
    input_ = input;
    input_tops_ = tops;
    input->set_batch_size(batch_override_);
  }
  std::vector<float> weights(lp.top_size(), 0.f);
  for (int j = 0; j < lp.top_size(); ++j) {
    if (j < lp.loss_weight_size())
      weights[j] = lp.loss_weight(j);
    else if (j == 0 && layer->is_loss())
      weights[j] = 1.f;
  }
  loss_weights_.push_back(std::move(weights));
  top_names_.emplace_back(lp.top().begin(), lp.top().end());
  bottoms_.push_back(std::move(bottoms));
  tops_.push_back(std::move(tops));
  layers_.push_back(std::move(layer));
}

// A layer in place on the top of the layer before it (a Scale after a BatchNorm) reads that layer's
// kept copy of the values instead of keeping one of its own: one activation less per pair.
template <typename T>
void Net<T>::share_kept_input(int i) {
  const bool in_place_on_previous = i > 0 && bottoms_[i].size() == 1 && tops_[i].size() == 1 &&
                                    tops_[i][0] == bottoms_[i][0] && tops_[i - 1].size() == 1 &&
                                    tops_[i - 1][0] == bottoms_[i][0];
  if (!in_place_on_previous) return;
  if (const Blob<T>* kept = layers_[i - 1]->kept_top()) layers_[i]->use_kept_input(kept);
}

template <typename T>
void Net<T>::check_saved_names(const proto::NetParameter& param, const std::string& source) const {
  std::map<std::string, int> holder;
  for (int i = 0; i < num_layers(); ++i) {
    if (layers_[i]->params().empty() && layers_[i]->state().empty()) continue;
    const auto [it, fresh] = holder.emplace(layers_[i]->name(), i);
    if (fresh) continue;
    const proto::LayerParameter& first = param.layer(it->second);
    throw ModelError(cat(located(source, param.layer(i)), ": layer '", layers_[i]->name(),
                         "': the name is already used by another layer",
                         first.has_source_line() ? cat(" (line ", first.source_line(), ")") : "",
                         "; each layer that learns needs its own, since its parameters are saved "
                         "under it"));
  }
}

template <typename T>
void Net<T>::absorb_relus() {
  absorbed_.assign(num_layers(), false);
  forward_absorbed_.assign(num_layers(), false);
  for (int i = 1; i < num_layers(); ++i) {
    const Layer<T>& relu = *layers_[i];
    const bool in_place_on_previous = bottoms_[i].size() == 1 && tops_[i].size() == 1 &&
                                      tops_[i][0] == bottoms_[i][0] &&
                                      tops_[i - 1].size() == 1 && tops_[i - 1][0] == bottoms_[i][0];
    if (relu.type() == "ReLU" && relu.param().relu_param().negative_slope() == 0.f &&
        in_place_on_previous && !forward_absorbed_[i - 1]) {
      const ReluAbsorption how = layers_[i - 1]->absorb_relu();
      forward_absorbed_[i] = how != ReluAbsorption::kNone;
      absorbed_[i] = how == ReluAbsorption::kForwardAndBackward;
    }
  }
}

template <typename T>
void Net<T>::fuse_batch_norm_scales() {
  // fp32 only: in double the compiler may fuse the Scale's product into BatchNorm's sums (an
  // FMA), which moves the last bits away from those of the two layers apart on the CPU. (On
  // CUDA the pair's sums differ from those apart in rounding.)
  if (!std::is_same_v<T, float>) return;
  for (int i = 1; i < num_layers(); ++i) {
    auto* batch_norm = dynamic_cast<BatchNormLayer<T>*>(layers_[i - 1].get());
    auto* scale = dynamic_cast<ScaleLayer<T>*>(layers_[i].get());
    if (!batch_norm || !scale || !scale->scales_channels()) continue;
    const Blob<T>* values = bottoms_[i - 1][0];
    const bool one_blob =
        tops_[i - 1][0] == values && bottoms_[i][0] == values && tops_[i][0] == values;
    const bool both_backward = needs_backward_[i - 1] && needs_backward_[i] &&
                               propagate_down_[i - 1][0] && propagate_down_[i][0];
    const bool neither_backward = !needs_backward_[i - 1] && !needs_backward_[i];
    if (one_blob && (both_backward || neither_backward)) scale->run_inside(*batch_norm);
  }
}

// Caffe's rule: a layer runs backward if it has trainable parameters or a bottom that needs a
// gradient, and only if some top contributes to the loss; propagate_down: false cuts a bottom off,
// and force_backward runs every layer backward to every bottom it can.
template <typename T>
void Net<T>::mark_backward() {
  const int n = num_layers();
  std::set<const Blob<T>*> needs_grad, under_loss;
  std::vector<bool> learns(n, false);
  auto may_propagate = [this](int i, size_t j) {
    const auto& lp = layers_[i]->param();
    return layers_[i]->can_backward_to(static_cast<int>(j)) &&
           (lp.propagate_down_size() == 0 || lp.propagate_down(static_cast<int>(j)));
  };
  for (int i = 0; i < n; ++i) {
    const auto& lp = layers_[i]->param();
    for (size_t p = 0; p < layers_[i]->params().size(); ++p)
      if (static_cast<int>(p) >= lp.param_size() || lp.param(p).lr_mult() != 0.f) learns[i] = true;
    bool any = learns[i];
    for (size_t j = 0; j < bottoms_[i].size(); ++j)
      if (needs_grad.count(bottoms_[i][j]) && may_propagate(i, j)) any = true;
    if (any && !layers_[i]->is_input())
      for (auto* top : tops_[i]) needs_grad.insert(top);
  }
  needs_backward_.assign(n, false);
  propagate_down_.assign(n, {});
  std::set<const Blob<T>*> unread_grad;  // blobs whose consumer takes no gradient from them
  for (int i = n - 1; i >= 0; --i) {
    bool contributes = false;
    bool all_tops_unread = !tops_[i].empty();  // then the layer's gradients would go nowhere
    for (size_t j = 0; j < tops_[i].size(); ++j) {
      if (loss_weights_[i][j] != 0.f || under_loss.count(tops_[i][j])) contributes = true;
      if (loss_weights_[i][j] != 0.f || !unread_grad.count(tops_[i][j])) all_tops_unread = false;
    }
    propagate_down_[i].assign(bottoms_[i].size(), false);
    if (contributes && !all_tops_unread && !layers_[i]->is_input()) {
      for (size_t j = 0; j < bottoms_[i].size(); ++j)
        propagate_down_[i][j] = needs_grad.count(bottoms_[i][j]) > 0 && may_propagate(i, j);
      needs_backward_[i] =
          learns[i] || std::find(propagate_down_[i].begin(), propagate_down_[i].end(), true) !=
                           propagate_down_[i].end();
    }
    for (size_t j = 0; j < bottoms_[i].size(); ++j) {
      if (contributes) under_loss.insert(bottoms_[i][j]);
      if (!propagate_down_[i][j]) unread_grad.insert(bottoms_[i][j]);
    }
  }
  if (!force_backward_) return;
  for (int i = 0; i < n; ++i) {
    if (layers_[i]->is_input()) continue;
    needs_backward_[i] = true;
    propagate_down_[i].assign(bottoms_[i].size(), false);
    for (size_t j = 0; j < bottoms_[i].size(); ++j) propagate_down_[i][j] = may_propagate(i, j);
  }
}

template <typename T>
std::map<std::pair<int, int>, std::pair<int, int>> Net<T>::shared_params(const std::string& source) const {
  std::map<std::string, std::pair<int, int>> owner;  // name -> (layer, index)
  std::map<std::pair<int, int>, std::pair<int, int>> sharers;
  for (int i = 0; i < num_layers(); ++i) {
    const auto& lp = layers_[i]->param();
    for (int p = 0; p < static_cast<int>(layers_[i]->params().size()) && p < lp.param_size(); ++p) {
      const proto::ParamSpec& spec = lp.param(p);
      if (spec.name().empty()) continue;
      const auto [it, first] = owner.emplace(spec.name(), std::pair{i, p});
      if (first) continue;
      const auto [oi, op] = it->second;
      const Blob<T>& mine = *layers_[i]->params()[p];
      const Blob<T>& theirs = *layers_[oi]->params()[op];
      const proto::ParamSpec& owner_spec = layers_[oi]->param().param(op);
      const bool permissive = spec.share_mode() == proto::ParamSpec::PERMISSIVE;
      if (permissive ? mine.count() != theirs.count() : mine.shape() != theirs.shape())
        throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' shares parameter '", spec.name(),
                             "' of shape ", shape_string(mine.shape()), " with layer '", layers_[oi]->name(),
                             "', whose is ", shape_string(theirs.shape()),
                             permissive ? "" : " (share_mode: PERMISSIVE needs only equal counts)"));
      if (spec.lr_mult() != owner_spec.lr_mult() || spec.decay_mult() != owner_spec.decay_mult())
        throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' shares parameter '", spec.name(),
                             "' with layer '", layers_[oi]->name(), "' but gives another lr_mult or decay_mult"));
      sharers[{i, p}] = it->second;
    }
  }
  return sharers;
}

// Weight sharing (ParamSpec.name): the first layer in forward order that names a parameter owns
// it, and the others use its memory, so their gradients add into its own (layers accumulate into
// parameter diffs) and it is counted and exchanged once. The owner's slot sits where its layer
// puts it, the last in backward order: the chunk holding it completes after every sharer's backward.
template <typename T>
std::set<int> Net<T>::streamed_layers(const std::vector<std::string>& names,
                                      const std::string& source) const {
  std::set<int> layers;
  for (const std::string& name : names) {
    int found = -1;
    for (int i = 0; i < num_layers(); ++i)
      if (layers_[i]->name() == name && !layers_[i]->params().empty()) found = i;
    if (found < 0)
      throw ModelError(
          cat(source, ": no layer '", name, "' with a weight to stream from host memory"));
    if (!layers_[found]->can_stream_weight())
      throw ModelError(cat(source, ": layer '", name, "' (", layers_[found]->type(),
                           ") cannot stream its weight from host memory"));
    layers.insert(found);
  }
  return layers;
}

template <typename T>
void Net<T>::gather_params(const std::string& source, const std::vector<std::string>& streamed) {
  const auto sharers = shared_params(source);
  const std::set<int> streamed_at = streamed_layers(streamed, source);
  for (int i : streamed_at)
    if (sharers.count({i, 0}) || std::any_of(sharers.begin(), sharers.end(), [&](const auto& s) {
          return s.second == std::pair{i, 0};
        }))
      throw ModelError(cat(source, ": layer '", layers_[i]->name(),
                           "' shares its weight by name: it cannot be streamed from host memory"));
  layer_ranges_.assign(num_layers(), {0, 0});
  int64_t offset = 0;
  auto add_slot = [&](int i, int p) {
    const auto& lp = layers_[i]->param();
    ParamSlot slot;
    slot.layer = i;
    slot.index = p;
    slot.offset = offset;
    slot.count = layers_[i]->params()[p]->count();
    if (p < lp.param_size()) {
      slot.lr_mult = lp.param(p).lr_mult();
      slot.decay_mult = lp.param(p).decay_mult();
    }
    slot.name = cat(lp.name(), "/", p);
    offset += slot.count;
    slots_.push_back(slot);
  };
  for (int i = num_layers() - 1; i >= 0; --i) {  // backward order
    const int64_t begin = offset;
    for (size_t p = 0; p < layers_[i]->params().size(); ++p)
      if (!sharers.count({i, static_cast<int>(p)}) && !(p == 0 && streamed_at.count(i)))
        add_slot(i, static_cast<int>(p));
    layer_ranges_[i] = {begin, offset};
  }
  device_count_ = offset;
  for (auto it = streamed_at.rbegin(); it != streamed_at.rend(); ++it) add_slot(*it, 0);
  flat_count_ = offset;
  const auto bytes = [](int64_t n) { return static_cast<size_t>(n) * sizeof(T); };
  flat_data_buf_ = DeviceBuffer(*device_, bytes(device_count_));
  if (flat_count_ > device_count_)
    host_data_buf_ = PinnedHostBuffer(*device_, bytes(flat_count_ - device_count_));
  if (phase_ == Phase::Train) {  // a TEST net only runs forward
    flat_diff_buf_ = DeviceBuffer(*device_, bytes(device_count_));
    if (flat_count_ > device_count_)
      host_diff_buf_ = PinnedHostBuffer(*device_, bytes(flat_count_ - device_count_));
  }
  flat_data_ptr_ = static_cast<T*>(flat_data_buf_.get());
  flat_diff_ptr_ = static_cast<T*>(flat_diff_buf_.get());
  T* host_data = host_flat_data().data();
  T* host_diff = host_flat_diff().data();
  for (const ParamSlot& s : slots_) {
    Blob<T>& blob = *layers_[s.layer]->params()[s.index];
    if (s.offset < device_count_) {
      blob.bind_to(flat_data_ptr_ + s.offset, flat_diff_ptr_ ? flat_diff_ptr_ + s.offset : nullptr);
      continue;
    }
    const int64_t at = s.offset - device_count_;
    blob.bind_to_host(host_data + at, host_diff ? host_diff + at : nullptr);
    layers_[s.layer]->stream_weight();
  }
  for (const auto& [sharer, owner] : sharers) {
    layers_[sharer.first]->params()[sharer.second]->share_with(*layers_[owner.first]->params()[owner.second]);
    shared_.insert(sharer);
    shared_.insert(owner);
  }
}

template <typename T>
int64_t Net<T>::batch_size() const {
  return input_tops_.empty() ? 0 : input_tops_[0]->shape(0);
}

template <typename T>
void Net<T>::set_batch_size(int64_t batch) {
  if (batch == batch_size()) return;
  input_->set_batch_size(batch);
  for (int i = 0; i < num_layers(); ++i) layers_[i]->reshape(bottoms_[i], tops_[i]);
}

template <typename T>
Blob<T>* Net<T>::blob(const std::string& name) const {
  auto it = latest_.find(name);
  return it == latest_.end() ? nullptr : it->second;
}

template <typename T>
void Net<T>::forward_layer(int i, const RunContext& ctx) {
  if (layers_[i]->is_input() || forward_absorbed_[i]) return;
  auto run = [this, i, ctx] { layers_[i]->forward(ctx, bottoms_[i], tops_[i]); };
  if (ctx.stream)
    ctx.stream->submit(run);
  else
    run();
}

template <typename T>
void Net<T>::backward_layer(int i, const RunContext& ctx) {
  if (!needs_backward_[i] || absorbed_[i]) return;
  if (phase_ != Phase::Train) throw Error(cat("layer '", layers_[i]->name(), "': a TEST net keeps no gradients"));
  auto run = [this, i, ctx] {
    layers_[i]->backward(ctx, tops_[i], propagate_down_[i], bottoms_[i]);
  };
  if (ctx.stream)
    ctx.stream->submit(run);
  else
    run();
}

template <typename T>
void Net<T>::forward(const RunContext& ctx) {
  for (int i = 0; i < num_layers(); ++i) forward_layer(i, ctx);
}

template <typename T>
void Net<T>::set_loss_scale(double scale) {
  for (auto [top, weight] : loss_tops()) {
    if (!top->has_diff()) continue;
    const T seed = static_cast<T>(weight * scale);
    device_->copy(top->mutable_diff(), &seed, sizeof(T));
  }
}

template <typename T>
std::vector<std::pair<Blob<T>*, float>> Net<T>::loss_tops() const {
  std::vector<std::pair<Blob<T>*, float>> out;
  for (int i = 0; i < num_layers(); ++i)
    for (size_t j = 0; j < tops_[i].size(); ++j)
      if (loss_weights_[i][j] != 0.f) out.emplace_back(tops_[i][j], loss_weights_[i][j]);
  return out;
}

template <typename T>
T Net<T>::read_scalar(const Blob<T>& blob) const {
  T value;
  device_->copy(&value, blob.data(), sizeof(T));
  return value;
}

template <typename T>
double Net<T>::loss() const {
  double sum = 0;
  for (auto [top, weight] : loss_tops()) sum += weight * static_cast<double>(read_scalar(*top));
  return sum;
}

template <typename T>
std::map<std::string, double> Net<T>::scalar_outputs() const {
  std::set<const Blob<T>*> consumed;
  for (const auto& b : bottoms_) consumed.insert(b.begin(), b.end());
  std::map<std::string, double> out;
  for (int i = 0; i < num_layers(); ++i)
    for (size_t j = 0; j < tops_[i].size(); ++j)
      if (loss_weights_[i][j] == 0.f && tops_[i][j]->count() == 1 && !consumed.count(tops_[i][j]) &&
          !layers_[i]->is_input())
        out[top_names_[i][j]] = static_cast<double>(read_scalar(*tops_[i][j]));
  return out;
}

template <typename T>
std::optional<std::string> Net<T>::first_non_finite_layer() const {
  std::vector<T> values;
  for (int i = 0; i < num_layers(); ++i)
    for (const Blob<T>* top : tops_[i]) {
      if (written_over_.count(top)) continue;  // holds a later layer's output now
      if (top->data_owner()->data_is_planned()) continue;  // the arena has other values there now
      values.resize(static_cast<size_t>(top->count()));
      device_->copy(values.data(), top->data(), top->bytes());
      for (T v : values)
        if (!std::isfinite(v)) return layers_[i]->name();
    }
  return std::nullopt;
}

template <typename T>
void Net<T>::zero_param_diffs(Stream& stream) {
  if (device_count_)
    stream.zero_async(flat_diff_ptr_, static_cast<size_t>(device_count_) * sizeof(T));
  if (std::span<T> host = host_flat_diff();
      !host.empty())  // host memory: a host function, in order
    stream.launch_host_func([host] { std::fill(host.begin(), host.end(), T(0)); });
}

template <typename T>
void Net<T>::share_params_from(Net& other) {
  for (auto& layer : layers_) {
    if (layer->params().empty() && layer->state().empty()) continue;
    Layer<T>* peer = nullptr;
    for (auto& candidate : other.layers_)
      if (candidate->name() == layer->name()) peer = candidate.get();
    if (!peer || peer->params().size() != layer->params().size() ||
        peer->state().size() != layer->state().size())
      throw ModelError(cat("layer '", layer->name(), "' has no matching layer in the ",
                           other.phase_ == Phase::Train ? "train" : "test", " net"));
    for (size_t p = 0; p < layer->params().size(); ++p) {
      layer->params()[p]->share_with(*peer->params()[p]);
      if (layer->params()[p]->on_host()) layer->stream_weight(peer);
    }
    for (size_t s = 0; s < layer->state().size(); ++s)
      layer->state()[s]->share_with(*peer->state()[s]);
  }
  slots_.clear();  // this net no longer owns parameters: it reads the other's
  flat_data_buf_.reset();
  flat_diff_buf_.reset();
  host_data_buf_.reset();
  host_diff_buf_.reset();
  flat_data_ptr_ = flat_diff_ptr_ = nullptr;
  flat_count_ = device_count_ = 0;
  layer_ranges_.assign(num_layers(), {0, 0});
}

template <typename T>
std::vector<std::pair<std::string, Blob<T>*>> Net<T>::state_blobs() {
  std::vector<std::pair<std::string, Blob<T>*>> out;
  for (auto& layer : layers_)
    for (size_t s = 0; s < layer->state().size(); ++s)
      out.emplace_back(cat(layer->name(), "/", s), layer->state()[s].get());
  return out;
}

template <typename T>
std::string Net<T>::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  };
  for (const auto& layer : layers_) {
    if (layer->params().empty() && layer->state().empty()) continue;
    mix(layer->name() + ":" + layer->type());
    for (const auto& p : layer->params()) mix(cat("p", shape_string(p->shape())));
    for (const auto& s : layer->state()) mix(cat("s", shape_string(s->shape())));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

template class Net<float>;
template class Net<double>;

template <typename T>
std::unique_ptr<Net<T>> make_test_net(const proto::NetParameter& model, Net<T>& train,
                                      Device& device, int64_t batch, uint64_t seed,
                                      const std::string& source) {
  auto test = std::make_unique<Net<T>>(model, Phase::Test, device, batch, seed, source,
                                       ActivationMemory::Planned, &train);
  test->plan_activations(kNoArenaLimit, &train);
  return test;
}

template std::unique_ptr<Net<float>> make_test_net(const proto::NetParameter&, Net<float>&, Device&,
                                                   int64_t, uint64_t, const std::string&);
template std::unique_ptr<Net<double>> make_test_net(const proto::NetParameter&, Net<double>&,
                                                    Device&, int64_t, uint64_t, const std::string&);

}  // namespace cgdp
