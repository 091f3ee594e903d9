// Net::plan_activations: which steps touch each activation's values and gradient, the plan
// (activation_plan.cpp), and the arena's memory bound to the blobs; lending it between passes.
#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "cgdp/core/error.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {

template <typename T>
typename Net<T>::IdleBytes Net<T>::idle_between_passes() {
  const DeviceBuffer& larger =
      activation_arena_.bytes() > activation_diffs_.bytes() ? activation_arena_ : activation_diffs_;
  return {larger.get(), static_cast<int64_t>(larger.bytes())};
}

template <typename T>
void Net<T>::reserve_idle_bytes(int64_t bytes) {
  if (idle_between_passes().bytes >= bytes) return;
  // Dead between passes: nothing to copy, and no moment with both buffers.
  if (arena_gradients_.empty()) {
    activation_diffs_.reset();
    activation_diffs_ = DeviceBuffer(*device_, static_cast<size_t>(bytes));
    T* base = static_cast<T*>(activation_diffs_.get());
    for (const auto& [blob, offset] : activation_diff_offsets_) blob->bind_diff(base + offset);
  } else {
    activation_arena_.reset();
    activation_arena_ = DeviceBuffer(*device_, static_cast<size_t>(bytes));
    bind_arena();
  }
  for (Net* borrower : borrowers_) borrower->bind_arena();
}

template <typename T>
Net<T>::~Net() {
  if (lender_) std::erase(lender_->borrowers_, this);
  for (Net* borrower : borrowers_) borrower->lender_ = nullptr;
}

template <typename T>
void Net<T>::bind_arena() {
  auto* arena = static_cast<char*>(arena_borrowed_ ? lender_->idle_between_passes().ptr
                                                   : activation_arena_.get());
  auto* host = static_cast<char*>(offloaded_values_.get());
  for (size_t k = 0; k < arena_owners_.size(); ++k) {
    PlannedActivation& a = activation_plan_.activations[k];
    a.device_ptr = arena + a.offset;
    a.host_ptr = a.offloaded ? host + a.host_offset : nullptr;
    a.pack_ptr = a.packed ? arena + a.pack_offset : nullptr;
    arena_owners_[k]->bind_data(reinterpret_cast<T*>(a.device_ptr));
    arena_owners_[k]->bind_packed_values(a.only_packed() ? static_cast<const uint16_t*>(a.pack_ptr)
                                                         : nullptr);
  }
  for (size_t k = 0; k < arena_gradients_.size(); ++k)
    for (Blob<T>* blob : {arena_gradients_[k].blob, arena_gradients_[k].shared})
      if (blob) blob->bind_diff(reinterpret_cast<T*>(arena + activation_plan_.gradients[k].offset));
  // Aliases copied their source's pointer when they were shaped: point them at the arena.
  for (int i = 0; i < num_layers(); ++i)
    for (Blob<T>* top : tops_[i])
      if (top->data_source()) top->alias_data(*top->data_source());
}

// The gradients a train net plans, alive from the backward step that first writes them to the one
// that last reads them (an absorbed ReLU's backward runs inside the layer before it, one step
// later).
template <typename T>
std::vector<PlannedGradient> Net<T>::planned_gradients() {
  const int layers = num_layers();
  const auto backward_step = [&](int layer) {
    return 2 * layers - 1 - (absorbed_[layer] ? layer - 1 : layer);
  };
  std::map<const Blob<T>*, std::string> name_of;  // the first top name a blob has
  for (int i = 0; i < layers; ++i)
    for (size_t j = 0; j < tops_[i].size(); ++j) name_of.try_emplace(tops_[i][j], top_names_[i][j]);
  std::vector<PlannedGradient> gradients;
  arena_gradients_.clear();
  for (const GradientSpan& s : gradient_spans()) {
    const std::string names =
        s.shared ? cat(name_of[s.blob], " and ", name_of[s.shared]) : name_of[s.blob];
    gradients.push_back({cat(names, " (gradient)"),
                         static_cast<int64_t>(s.blob->bytes()),
                         {2 * layers - 1 - s.last, backward_step(s.first)}});
    arena_gradients_.push_back(s);
  }
  return gradients;
}

// A layer whose forward may write its output over its input (Layer::forward_in_place) does where
// it is that input's last forward reader and every backward reader reads the input's 16-bit copy:
// the output takes the input's bytes (LRN after a ReLU: AlexNet's arena then holds one of norm1's
// input and output instead of both).
template <typename T>
void Net<T>::write_outputs_over_inputs(std::vector<PlannedActivation>& units,
                                       const std::map<Blob<T>*, size_t>& unit_of) const {
  const auto index = [&](Blob<T>* b) {
    const auto it = unit_of.find(b->data_owner());
    return it == unit_of.end() ? -1 : static_cast<int>(it->second);
  };
  for (int i = 0; i < num_layers(); ++i) {
    if (absorbed_[i] || !layers_[i]->forward_in_place() || bottoms_[i].size() != 1 ||
        tops_[i].size() != 1)
      continue;
    const int in = index(bottoms_[i][0]), out = index(tops_[i][0]);
    if (in < 0 || out < 0 || in == out) continue;
    const PlannedActivation& a = units[static_cast<size_t>(in)];
    const PlannedActivation& b = units[static_cast<size_t>(out)];
    const bool copy_kept =
        a.packable && a.read_packed && !a.kept_to_end && a.first_backward > i + 1;
    if (copy_kept && a.produced < i && a.last_forward == i && a.takes_bytes_of < 0 &&
        b.produced == i && b.bytes == a.bytes)
      units[static_cast<size_t>(out)].takes_bytes_of = in;
  }
}

template <typename T>
void Net<T>::plan_activations(int64_t limit, Net* lender, Packing packing, bool write_over) {
  CGDP_ASSERT(memory_ == ActivationMemory::Planned);
  const bool sixteen =
      packing != Packing::None && std::is_same_v<T, float> && is_16_bit(layer_precision());
  const int layers = num_layers();
  const auto backward_step = [layers](int layer) { return 2 * layers - 1 - layer; };
  std::map<Blob<T>*, size_t> unit_of;  // owner of the values -> index in `units`
  std::vector<PlannedActivation> units;
  std::vector<Blob<T>*> owners;
  // The unit holding `b`'s values; nullptr when they are not the plan's (empty, or a view).
  const auto unit = [&](Blob<T>* b, const std::string& name) -> PlannedActivation* {
    Blob<T>* owner = b->data_owner();
    if (!owner->data_is_deferred() || owner->count() == 0) return nullptr;
    const auto [it, fresh] = unit_of.emplace(owner, units.size());
    if (fresh) {
      PlannedActivation a;
      a.name = name;
      a.bytes = static_cast<int64_t>(owner->bytes());
      a.produced = INT_MAX;
      a.last_forward = -1;
      a.packable = sixteen;  // until a backward reader needs more than 16 bits
      a.read_packed = sixteen;  // until one reads the values widened back
      a.signs_only = sixteen;   // until one reads more than their signs
      units.push_back(a);
      owners.push_back(owner);
    }
    return &units[it->second];
  };
  const auto touch_forward = [](PlannedActivation* a, int step) {
    a->produced = std::min(a->produced, step);
    a->last_forward = std::max(a->last_forward, step);
  };
  const auto read_backward = [](PlannedActivation* a, int step) {
    a->first_backward = a->first_backward < 0 ? step : std::min(a->first_backward, step);
    a->last_backward = std::max(a->last_backward, step);
  };
  const bool runs_backward = phase_ == Phase::Train;  // a TEST net only runs forward
  std::set<const Blob<T>*> consumed;
  for (const BlobVec<T>& b : bottoms_) consumed.insert(b.begin(), b.end());
  for (int i = 0; i < layers; ++i) {
    // An absorbed ReLU's backward runs inside the layer before it, one step later.
    const int reader = absorbed_[i] ? backward_step(i - 1) : backward_step(i);
    for (const BlobVec<T>* blobs : {&bottoms_[i], &tops_[i]})
      for (size_t j = 0; j < blobs->size(); ++j) {
        Blob<T>* b = (*blobs)[j];
        const std::string& name = blobs == &tops_[i] ? top_names_[i][j] : layers_[i]->name();
        PlannedActivation* a = unit(b, name);
        if (!a) continue;
        // The input's values are copied in before the first layer runs.
        touch_forward(a, layers_[i]->is_input() ? 0 : i);
        if (runs_backward && needs_backward_[i] &&
            layers_[i]->backward_reads(*b, bottoms_[i], tops_[i])) {
          read_backward(a, reader);
          const bool exact = layers_[i]->backward_exact_from_16_bits(*b, bottoms_[i], tops_[i]);
          const bool may_round = packing == Packing::Rounding &&
                                 layers_[i]->backward_may_round(*b, bottoms_[i], tops_[i]);
          a->packable &= exact || may_round;
          a->rounds |= !exact && may_round;
          a->read_packed &= layers_[i]->backward_reads_packed(*b, bottoms_[i], tops_[i]);
          a->signs_only &= layers_[i]->backward_reads_only_sign(*b, bottoms_[i], tops_[i]);
        }
        if (blobs == &tops_[i] && (loss_weights_[i][j] != 0.f || !consumed.count(b)))
          a->kept_to_end = true;
      }
    if (Blob<T>* kept = layers_[i]->mutable_kept_indices())
      if (PlannedActivation* a = unit(kept, cat(layers_[i]->name(), " (indices)"))) {
        a->packable = a->read_packed = a->signs_only = false;  // not values
        touch_forward(a, i);
        if (runs_backward && needs_backward_[i]) read_backward(a, backward_step(i));
      }
    if (Blob<T>* kept = layers_[i]->mutable_kept_top()) {
      PlannedActivation* a = unit(kept, cat(layers_[i]->name(), " (kept)"));
      if (!a) continue;
      a->rounds = a->packable = sixteen && packing == Packing::Rounding &&
                                layers_[i]->backward_may_round(*kept, bottoms_[i], tops_[i]);
      a->read_packed = a->signs_only = false;  // BatchNorm and Scale read it widened
      touch_forward(a, i);
      if (runs_backward && needs_backward_[i]) read_backward(a, backward_step(i));
      // A layer in place after it may read it (share_kept_input).
      const bool next_in_place = i + 1 < layers && tops_[i].size() == 1 &&
                                 tops_[i + 1].size() == 1 && bottoms_[i + 1].size() == 1 &&
                                 tops_[i + 1][0] == tops_[i][0] &&
                                 bottoms_[i + 1][0] == tops_[i][0];
      if (next_in_place) {
        touch_forward(a, i + 1);
        if (runs_backward && needs_backward_[i + 1]) read_backward(a, backward_step(i + 1));
      }
    }
  }
  for (PlannedActivation& a : units)  // signs kept: exact, whatever the readers say of rounding
    if (a.signs_only && a.first_backward >= 0) {
      a.packable = true;
      a.rounds = false;
    } else {
      a.signs_only = false;
    }
  if (runs_backward && sixteen && write_over) write_outputs_over_inputs(units, unit_of);
  // A train net's gradients move into the arena: the old memory goes first, as the arena's.
  std::vector<PlannedGradient> gradients;
  if (runs_backward) {
    gradients = planned_gradients();
    activation_diffs_.reset();
    activation_diff_offsets_.clear();
  }
  activation_arena_.reset();  // a plan again: the old memory goes first
  offloaded_values_.reset();
  activation_plan_ =
      plan_activation_arena(std::move(units), 2 * layers, limit, std::move(gradients));
  arena_owners_ = std::move(owners);
  arena_borrowed_ = lender != nullptr && activation_plan_.host_bytes == 0;
  if (arena_borrowed_) {
    CGDP_ASSERT(arena_gradients_.empty() && (!lender_ || lender_ == lender));
    if (!lender_) lender->borrowers_.push_back(this);
    lender_ = lender;
    lender->reserve_idle_bytes(activation_plan_.arena_bytes);
  } else {
    activation_arena_ = DeviceBuffer(*device_, static_cast<size_t>(activation_plan_.arena_bytes));
  }
  offloaded_values_ = PinnedHostBuffer(*device_, static_cast<size_t>(activation_plan_.host_bytes));
  bind_arena();
}

template Net<float>::IdleBytes Net<float>::idle_between_passes();
template Net<double>::IdleBytes Net<double>::idle_between_passes();
template void Net<float>::reserve_idle_bytes(int64_t);
template Net<float>::~Net();
template Net<double>::~Net();
template void Net<float>::bind_arena();
template void Net<double>::bind_arena();
template std::vector<PlannedGradient> Net<float>::planned_gradients();
template std::vector<PlannedGradient> Net<double>::planned_gradients();
template void Net<double>::reserve_idle_bytes(int64_t);
template void Net<float>::plan_activations(int64_t, Net<float>*, Packing, bool);
template void Net<double>::plan_activations(int64_t, Net<double>*, Packing, bool);
template void Net<float>::write_outputs_over_inputs(std::vector<PlannedActivation>&,
                                                    const std::map<Blob<float>*, size_t>&) const;
template void Net<double>::write_outputs_over_inputs(std::vector<PlannedActivation>&,
                                                     const std::map<Blob<double>*, size_t>&) const;

}  // namespace cgdp
