// Net: a directed acyclic graph of layers built from a model file for one phase. Learnable
// parameters and their gradients live in two flat buffers laid out in *backward* order (the last
// layer's parameters first), so the gradients of any run of consecutive layers are one contiguous
// range: a chunk of layers moves to the host in one copy.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/layers/input_layer.hpp"
#include "cgdp/layers/layer.hpp"
#include "cgdp/net/activation_plan.hpp"

namespace cgdp {

// Where one learnable parameter tensor sits in the flat buffers.
struct ParamSlot {
  int layer = 0;       // index into Net::layers()
  int index = 0;       // index into that layer's params()
  int64_t offset = 0;  // element offset into flat_data()/flat_diff()
  int64_t count = 0;
  float lr_mult = 1;
  float decay_mult = 1;
  std::string name;  // "<layer>/<index>"
};

template <typename T>
class Net {
 public:
  // Builds the layers of `param` that belong to `phase`; batch_size > 0 overrides the Input's
  // first dimension. Parameters are filled from `seed`. Errors name `source` (the file).
  // ActivationMemory::Planned allocates no activation values: call plan_activations before use.
  // `params_from`: share its parameters from the start (share_params_from), so that this net
  // never holds a flat parameter buffer of its own, even while it is built.
  // `streamed_weights`: layers (by name) whose weight waits in pinned host memory and passes
  // through the device in slices (Layer::can_stream_weight): it is laid out after every other
  // parameter, so the device holds [0, device_learnable_count()) of the flat buffers.
  Net(const proto::NetParameter& param, Phase phase, Device& device, int64_t batch_size,
      uint64_t seed, const std::string& source = "model",
      ActivationMemory memory = ActivationMemory::Owned, Net* params_from = nullptr,
      const std::vector<std::string>& streamed_weights = {});
  ~Net();  // a lender forgets the nets that borrow its idle bytes, and they it
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  Phase phase() const { return phase_; }
  const std::string& name() const { return name_; }
  Device& device() const { return *device_; }
  int64_t batch_size() const;
  // Changes the batch size and reshapes every layer (e.g. a last, smaller test batch).
  void set_batch_size(int64_t batch);

  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer<T>& layer(int i) { return *layers_[i]; }
  const Layer<T>& layer(int i) const { return *layers_[i]; }
  const BlobVec<T>& bottoms(int i) const { return bottoms_[i]; }
  const BlobVec<T>& tops(int i) const { return tops_[i]; }
  const std::vector<std::string>& top_names(int i) const { return top_names_[i]; }
  bool needs_backward(int i) const { return needs_backward_[i]; }
  // Whether layer i's backward computes the gradient of each of its bottoms.
  const std::vector<bool>& propagate_down(int i) const { return propagate_down_[i]; }
  // Layer i is an in-place ReLU that the layer before it runs (Layer::absorb_relu; CPU only):
  // forward_layer(i) and backward_layer(i) do nothing.
  bool absorbed(int i) const { return absorbed_[i]; }
  // Layer i is an in-place ReLU whose forward the layer before it runs (absorbed(i), or a CUDA
  // convolution in 16 bits): forward_layer(i) does nothing.
  bool forward_absorbed(int i) const { return forward_absorbed_[i]; }
  // nullptr if absent. An activation between layers may be channel-blocked (Blob::channel_block);
  // the net's outputs never are.
  Blob<T>* blob(const std::string& name) const;
  InputLayer<T>& input_layer() { return *input_; }
  Blob<T>& input_data() { return *input_tops_.at(0); }
  Blob<T>* input_label() { return input_tops_.size() > 1 ? input_tops_[1] : nullptr; }

  // Runs layer i's forward or backward. With ctx.stream set, the work is submitted to that stream
  // (in order with whatever else is on it); without, it runs now on the calling thread (CPU
  // devices only: CUDA layers launch on ctx.stream).
  void forward_layer(int i, const RunContext& ctx);
  void backward_layer(int i, const RunContext& ctx);
  // A whole forward pass (tests; training walks the layers itself, see Worker).
  void forward(const RunContext& ctx);

  // Weighted sum of the loss tops, read from the device; call after forward has finished.
  double loss() const;
  // The tops that count towards the loss, with their weights.
  std::vector<std::pair<Blob<T>*, float>> loss_tops() const;
  // Backward starts from each loss top's weight times `scale` (loss scaling: loss_scale.hpp).
  // Between iterations only: the device copy does not wait for the streams.
  void set_loss_scale(double scale);
  // Scalar outputs of the net that are not losses (e.g. "accuracy"), by top name.
  std::map<std::string, double> scalar_outputs() const;
  // Name of the first layer (forward order) with a NaN or Inf in a top; nullopt if all finite.
  // Planned activations are not looked at: the arena holds later values in their bytes.
  std::optional<std::string> first_non_finite_layer() const;

  // Learnable parameters.
  const std::vector<ParamSlot>& param_slots() const { return slots_; }
  int64_t learnable_count() const { return flat_count_; }
  // The flat buffers' part on the device: every element but the streamed weights'.
  int64_t device_learnable_count() const { return device_count_; }
  std::span<T> flat_data() { return {flat_data_ptr_, static_cast<size_t>(device_count_)}; }
  std::span<T> flat_diff() { return {flat_diff_ptr_, static_cast<size_t>(device_count_)}; }
  // The rest, elements [device_learnable_count(), learnable_count()): the streamed weights, in
  // pinned host memory (empty spans when none is streamed).
  std::span<T> host_flat_data() {
    return {static_cast<T*>(host_data_buf_.get()),
            static_cast<size_t>(flat_count_ - device_count_)};
  }
  std::span<T> host_flat_diff() {
    return {static_cast<T*>(host_diff_buf_.get()),
            static_cast<size_t>(flat_count_ - device_count_)};
  }
  // Element range [begin, end) of layer i's parameters on the device (empty if none; a streamed
  // weight's layer: its bias).
  std::pair<int64_t, int64_t> layer_param_range(int i) const { return layer_ranges_[i]; }
  // Whether parameter `index` of layer i is shared by name with another layer's (as owner or
  // user): its gradient is then the sum of several layers' contributions.
  bool param_shared(int i, int index) const { return shared_.count({i, index}) > 0; }
  // Sets every parameter gradient to zero, in order on `stream`.
  void zero_param_diffs(Stream& stream);
  // Uses `other`'s parameters and persistent state (matched by layer name): the test net shares
  // the train net's memory, as in Caffe.
  void share_params_from(Net& other);
  // Persistent non-learnable state blobs in layer order (BatchNorm statistics).
  std::vector<std::pair<std::string, Blob<T>*>> state_blobs();
  // Device memory whose contents no one reads between two passes (the activations' gradients, or
  // the arena of planned values and gradients: each pass writes them before it reads them).
  struct IdleBytes {
    void* ptr = nullptr;
    int64_t bytes = 0;
  };
  IdleBytes idle_between_passes();
  // Grows the idle memory to at least `bytes`: the activations' gradient buffer, or the arena
  // when the gradients share it (moving what it holds, dead between passes, to the new one), and
  // moves every net that borrows it along. Before the first pass: whoever read a gradient's or a
  // planned value's pointer before holds a stale one.
  void reserve_idle_bytes(int64_t bytes);
  // Planned nets: places every activation's values in one arena of at most `limit` bytes (a train
  // net's activation gradients too, in the bytes of values already dead when they are written),
  // offloading to pinned host memory what must wait there (activation_arena.cpp), and allocates
  // the arena and the host buffer. Before the first pass; again only between passes.
  // `lender`: a net whose idle memory holds the arena instead (a test net borrows the train net's:
  // it runs between the train net's passes, on the same stream), grown to fit it when needed;
  // it must plan no more after that (it may lend to more nets). Not with values on the host.
  // `packing`: in a 16-bit layer_precision(), what waits as 16-bit copies between the passes
  // (float nets; the copies are the worker's to issue too). `write_over`: a layer may then write
  // its output over an input no one reads after it but from that copy (false: a test's reference).
  void plan_activations(int64_t limit = kNoArenaLimit, Net* lender = nullptr,
                        Packing packing = Packing::Rounding, bool write_over = true);
  // Whether the arena is another net's idle memory (plan_activations' `lender`).
  bool arena_borrowed() const { return arena_borrowed_; }
  // The plan (empty for ActivationMemory::Owned). Its activations' copies are the worker's to
  // issue (train/offload_schedule.hpp).
  const ActivationPlan& activation_plan() const { return activation_plan_; }
  bool activations_planned() const { return memory_ == ActivationMemory::Planned; }
  // Bytes of the one buffer the activations' gradients share (plan_activation_gradients); 0 once
  // plan_activations put them in the arena.
  int64_t activation_gradient_bytes() const { return static_cast<int64_t>(activation_diffs_.bytes()); }
  // Hash of layer names, types and parameter shapes: checkpoints must match it.
  std::string fingerprint() const;

 private:
  void build(const proto::NetParameter& param, uint64_t seed, const std::string& source,
             Net* params_from, const std::vector<std::string>& streamed);
  void wire_layer(const proto::LayerParameter& lp, const std::string& source);
  void mark_backward();
  // Offers every in-place ReLU with negative_slope 0 to the layer right before it, whose top it
  // rewrites; marks those taken as absorbed.
  void absorb_relus();
  // CPU, fp32: a Scale in place on the output of a BatchNorm in place runs inside it (one blob,
  // both backwards run or neither): ScaleLayer::run_inside.
  void fuse_batch_norm_scales();
  // Keeps in a channel block the activations whose writer and readers run faster in it
  // (channel_blocks.cpp); the rest stay Caffe's NCHW.
  void choose_channel_blocks();
  // Parameters and state are saved as "<layer>/<index>": two layers that hold any may not share a
  // name. Others may (Caffe's autoencoder names two loss layers "loss").
  void check_saved_names(const proto::NetParameter& param, const std::string& source) const;
  // Offers layer i, when it runs in place on the top of layer i - 1, that layer's kept copy.
  void share_kept_input(int i);
  // An activation gradient the net plans, and the first and last layers (forward order) whose
  // passes touch its blob: it is alive from the backward of `last` to that of `first`.
  struct GradientSpan {
    Blob<T>* blob = nullptr;
    int first = 0, last = 0;
    Blob<T>* shared = nullptr;  // a bottom whose gradient takes the same place (gradient_in_place)
  };
  std::vector<GradientSpan> gradient_spans() const;
  void share_in_place_gradients(std::vector<GradientSpan>& spans) const;
  // The blobs whose gradient some backward reads (a top of a layer that runs backward) or writes
  // (a bottom it propagates to); the others, as the input's data and labels, need none.
  std::set<const Blob<T>*> blobs_with_gradients() const;
  // Places the activations' gradients in one buffer, sharing bytes between gradients that are
  // never alive in the same stretch of the backward pass (memory_plan.cpp).
  void plan_activation_gradients();
  // gradient_spans() as the arena's plan takes them, remembering their blobs in arena_gradients_.
  std::vector<PlannedGradient> planned_gradients();
  // Marks the units a layer's forward writes over (PlannedActivation::takes_bytes_of).
  void write_outputs_over_inputs(std::vector<PlannedActivation>& units,
                                 const std::map<Blob<T>*, size_t>& unit_of) const;
  // Points the planned values, their 16-bit copies and host places, and the gradients in the
  // arena, at the arena's memory (the lender's idle bytes when borrowed).
  void bind_arena();
  // Layer i, an Eltwise being built, writes its result over a bottom whose values nothing reads
  // any more, if it has one (memory_plan.cpp). `last_touch`: blob name -> its last layer.
  void reuse_dead_bottom(int i, const proto::LayerParameter& lp, const std::map<std::string, int>& last_touch);
  // (layer, index) of each parameter that uses another's memory -> (layer, index) of its owner;
  // throws ModelError when sharers' shapes or multipliers differ.
  std::map<std::pair<int, int>, std::pair<int, int>> shared_params(const std::string& source) const;
  void gather_params(const std::string& source, const std::vector<std::string>& streamed);
  // Layer indices of `names`, each an InnerProduct-like layer that can stream an unshared weight.
  std::set<int> streamed_layers(const std::vector<std::string>& names,
                                const std::string& source) const;
  // One value of a blob's data, copied from the device.
  T read_scalar(const Blob<T>& blob) const;

  std::string name_;
  Phase phase_;
  Device* device_;
  int64_t batch_override_;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  std::vector<BlobVec<T>> bottoms_, tops_;
  std::vector<std::vector<std::string>> top_names_;
  std::vector<std::vector<bool>> propagate_down_;
  std::vector<bool> needs_backward_;
  std::vector<bool> absorbed_;
  std::vector<bool> forward_absorbed_;
  std::set<const Blob<T>*> written_over_;  // blobs whose memory a later layer's output took
  bool force_backward_ = false;  // the model's force_backward: every layer runs backward
  std::vector<std::vector<float>> loss_weights_;  // per layer, per top
  std::map<std::string, std::unique_ptr<Blob<T>>> blobs_;
  std::map<std::string, Blob<T>*> latest_;   // blob name -> blob currently holding it
  std::map<Blob<T>*, int> producer_;         // blob -> layer that last wrote it
  InputLayer<T>* input_ = nullptr;
  BlobVec<T> input_tops_;

  std::vector<ParamSlot> slots_;
  std::vector<std::pair<int64_t, int64_t>> layer_ranges_;
  std::set<std::pair<int, int>> shared_;  // (layer, index) of every shared parameter
  DeviceBuffer flat_data_buf_, flat_diff_buf_;
  DeviceBuffer activation_diffs_;  // the gradients of activations, planned by liveness
  std::vector<std::pair<Blob<T>*, int64_t>> activation_diff_offsets_;  // elements into it
  ActivationMemory memory_ = ActivationMemory::Owned;
  ActivationPlan activation_plan_;
  DeviceBuffer activation_arena_;          // the values of planned activations (a train net's
                                           // activation gradients too)
  std::vector<Blob<T>*> arena_owners_;     // of activation_plan_.activations' values, in order
  std::vector<GradientSpan> arena_gradients_;  // of activation_plan_.gradients, in order
  bool arena_borrowed_ = false;        // they live in another net's idle bytes instead
  Net* lender_ = nullptr;              // whose, then
  std::vector<Net*> borrowers_;        // the nets whose arenas are this one's idle bytes
  PinnedHostBuffer offloaded_values_;  // where offloaded ones wait between forward and backward
  PinnedHostBuffer host_data_buf_, host_diff_buf_;  // the streamed weights (and their gradients)
  T* flat_data_ptr_ = nullptr;
  T* flat_diff_ptr_ = nullptr;
  int64_t flat_count_ = 0;
  int64_t device_count_ = 0;  // flat elements on the device; the rest are streamed
};

extern template class Net<float>;
extern template class Net<double>;

// A TEST net of `model` beside `train`, on `device` (train's own, or one that measures): it uses
// train's parameters, and its activations are planned by liveness in train's idle memory (tests
// run between train's passes, on its compute stream).
template <typename T>
std::unique_ptr<Net<T>> make_test_net(const proto::NetParameter& model, Net<T>& train,
                                      Device& device, int64_t batch, uint64_t seed,
                                      const std::string& source);

}  // namespace cgdp
