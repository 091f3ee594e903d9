// Layer: the unit of a net. A non-virtual public forward()/backward() dispatches to the backend's
// forward_cpu()/forward_cuda(); setup() validates bottoms, creates parameters and shapes tops.
// Each concrete layer lives in one header, src/layers/<name>_layer.cpp (CPU) and, in CUDA builds,
// src/layers/<name>_layer_cuda.cpp (cuDNN/cuBLAS calls and launches of kernels/<name>.cu).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/core/error.hpp"
#include "cgdp/device/device.hpp"
#include "cgdp/tensor/blob.hpp"

namespace cgdp {

enum class Phase { Train, Test };

// What a layer needs at run time besides its blobs.
struct RunContext {
  Phase phase = Phase::Train;
  Stream* stream = nullptr;   // compute stream: CUDA kernels launch here; CPU code already runs on it
  uint64_t seed = 0;          // run seed: dropout masks derive from it
  int64_t iteration = 0;      // solver iteration (dropout masks differ per iteration)
  int64_t sample_offset = 0;  // global index of this batch's first sample in the iteration
  int micro_batch = 0;        // which micro-batch of the iteration (--accumulate), from 0
};

using Rng = std::mt19937_64;

// What a backend keeps for a layer between calls (cuDNN descriptors, chosen algorithms, device
// scratch); each CUDA layer derives its own, created on its first call.
struct LayerBackendState {
  virtual ~LayerBackendState() = default;
};

// How a layer takes over an in-place ReLU that directly follows it (Layer::absorb_relu).
enum class ReluAbsorption {
  kNone,
  kForward,             // its forward clamps the top; the ReLU's own backward still runs
  kForwardAndBackward,  // and its backward masks the top's gradient first
};

template <typename T>
class Layer {
 public:
  using Blobs = std::vector<std::unique_ptr<Blob<T>>>;

  Layer(const proto::LayerParameter& param, Device& device) : param_(param), device_(&device) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const proto::LayerParameter& param() const { return param_; }
  const std::string& name() const { return param_.name(); }
  const std::string& type() const { return param_.type(); }
  Device& device() const { return *device_; }

  // Checks the number of bottoms and tops, creates and fills parameters, shapes the tops.
  void setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng);
  // Derives top shapes from bottom shapes (called again when the batch size changes).
  virtual void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) = 0;

  void forward(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top);
  // Fills bottom diffs where propagate_down[i], and accumulates (+=) parameter diffs.
  void backward(const RunContext& ctx, const BlobVec<T>& top,
                const std::vector<bool>& propagate_down, const BlobVec<T>& bottom);

  // Learnable parameters in Caffe's order (weights, then bias).
  Blobs& params() { return params_; }
  const Blobs& params() const { return params_; }
  // Persistent non-learnable state, e.g. BatchNorm's running statistics.
  Blobs& state() { return state_; }

  // Accepted numbers of bottoms and tops; -1 means any.
  virtual int min_bottoms() const { return 1; }
  virtual int max_bottoms() const { return 1; }
  virtual int min_tops() const { return 1; }
  virtual int max_tops() const { return 1; }
  // Loss layers produce a scalar in top[0] that the net sums, weighted by loss_weight.
  virtual bool is_loss() const { return false; }
  // False for inputs that have no gradient (labels).
  virtual bool can_backward_to(int bottom_index) const { return true; }
  // Whether top j may be bottom j itself (Caffe's in place): the layers whose forward and
  // backward need nothing the overwrite destroys say so (some still refuse particular settings
  // in their setup). Others would read what they have just written: setup refuses them.
  virtual bool can_run_in_place() const { return false; }
  // Layers like Input produce data from outside; the net does not call their forward.
  virtual bool is_input() const { return false; }
  // Asks this layer to take over an in-place ReLU (negative_slope 0) that directly follows it:
  // forward clamps the top at zero, and backward may mask the top's gradient first, each while an
  // image is still in cache (or as a 16-bit result is widened). kNone if it cannot (the default).
  virtual ReluAbsorption absorb_relu() { return ReluAbsorption::kNone; }
  // Channel-blocked activations (tensor/channel_blocks.hpp). A layer that blocks each blob on its
  // own (convolution, pooling) says which block it runs fastest with for bottom 0 (`top` false) or
  // top 0 (1 if none) and whether it reads (or writes) that blob in `block`. Any other layer needs
  // one block on all its blobs, which handles_channel_block accepts (`top` unused): ReLU, LRN,
  // BatchNorm, Eltwise, Concat accept more than Caffe's 1. The net blocks a blob only where every
  // layer on it agrees (Net::choose_channel_blocks).
  virtual bool blocks_each_blob() const { return false; }
  virtual int64_t preferred_channel_block(bool top) const { return 1; }
  virtual bool handles_channel_block(bool top, int64_t block) const { return block == 1; }
  // Whether params()[0] may wait in pinned host memory and pass through the device in slices
  // (Net's streamed weights: a weight larger than the run's budget allows). InnerProduct can.
  virtual bool can_stream_weight() const { return false; }
  // params()[0] now lives there (Blob::on_host): the layer allocates the device stage it passes
  // through, or uses `peer`'s (the train net's twin of a test net's layer, which never runs at
  // the same time). A streamed weight's layer runs on the CPU backend, for now.
  virtual void stream_weight(Layer* peer = nullptr) {}
  // Device bytes this layer's CUDA half allocates at its first pass besides blobs and the stream's
  // scratch (a ones column, decoded labels; `backward`: once a backward ran), which the memory
  // estimate builds no CUDA layer to see (memory_estimate.cpp).
  virtual int64_t cuda_buffer_bytes(bool backward) const { return 0; }
  // A blob holding a copy of top 0's values from this layer's forward until its backward
  // (BatchNorm's normalised output), which a layer in place on that top may read; nullptr if none.
  virtual const Blob<T>* kept_top() const { return nullptr; }
  // The same blob, for the net to say where its values live (the activation arena).
  Blob<T>* mutable_kept_top() { return const_cast<Blob<T>*>(kept_top()); }
  // A blob of indices (not values: never packed) this layer writes in its forward for its backward
  // alone (max pooling's argmax), whose bytes a planned net places in its activation arena as it
  // does a top's values; nullptr if none (always when forward only).
  virtual const Blob<T>* kept_indices() const { return nullptr; }
  Blob<T>* mutable_kept_indices() { return const_cast<Blob<T>*>(kept_indices()); }
  // Offers a layer that runs in place the blob `kept` (kept_top() of the layer before it), which
  // holds its input until its backward, to read instead of a copy of its own (Scale takes it).
  virtual void use_kept_input(const Blob<T>* kept) {}
  // Whether this layer's backward reads the values `blob` (one of its bottoms or tops) holds after
  // its forward. The net lets a blob no backward reads be overwritten once its last forward reader
  // has run (Net::reuse_dead_bottom). Yes by default, which is always safe.
  virtual bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom, const BlobVec<T>& top) const {
    return true;
  }
  // Whether this layer's backward gets the same bits from `blob`'s values rounded to the 16-bit
  // layer_precision() as from the values themselves: it rounds them to that precision first (a
  // multiplying layer's input) or reads only their sign (a ReLU's mask). The net keeps such
  // activations in 16 bits between forward and backward (activation_plan.hpp). No by default.
  virtual bool backward_exact_from_16_bits(const Blob<T>& blob, const BlobVec<T>& bottom,
                                           const BlobVec<T>& top) const {
    return false;
  }
  // Whether this layer's backward reads nothing of `blob`'s values but their signs (a ReLU's
  // mask): a value only such readers read waits in 16 bits narrowed keeping every sign
  // (narrow_keeping_signs), exactly in fp16 too. No by default.
  virtual bool backward_reads_only_sign(const Blob<T>& blob, const BlobVec<T>& bottom,
                                        const BlobVec<T>& top) const {
    return false;
  }
  // Whether this layer's backward may read `blob` (a bottom, a top or kept_top()) rounded to the
  // 16-bit layer_precision(): values that meet only sums kept in fp32, so the gradients move by
  // about that rounding, as under PyTorch's AMP. A run that packs with rounding
  // (Packing::Rounding) keeps such a value in 16 bits when its other backward readers get the
  // same bits from it. No by default.
  virtual bool backward_may_round(const Blob<T>& blob, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) const {
    return false;
  }
  // Whether this layer's backward reads `blob`'s values from the 16-bit copy a planned net keeps
  // (Blob::packed_values) whenever it keeps one, with the bits it would get from the values
  // widened back (a ReLU's mask). A packed value whose every backward reader does is never
  // widened: its fp32 bytes are free from its last forward use on. No by default.
  virtual bool backward_reads_packed(const Blob<T>& blob, const BlobVec<T>& bottom,
                                     const BlobVec<T>& top) const {
    return false;
  }
  // Whether this layer's backward may write bottom 0's gradient over top 0's (it reads each element
  // of the latter for the last time before it writes that element of the former): the net then
  // gives the two gradients one place. No by default.
  virtual bool gradient_in_place() const { return false; }
  // Whether this layer's forward may write top 0's values over bottom 0's (same shape): it reads
  // every input it needs for an element before it writes that element. A planned train net lets
  // it where nothing reads the input after it but from its 16-bit copy. No by default.
  virtual bool forward_in_place() const { return false; }
  // This layer's net only runs forward (a TEST net): it keeps nothing for a backward. Before setup.
  void set_forward_only() { forward_only_ = true; }
  // Its parameters get no gradient memory of their own: the net binds them to its flat buffers
  // (or shares another net's). Before setup.
  void defer_param_gradients() { defer_param_gradients_ = true; }

 protected:
  virtual void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) {}
  virtual void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom,
                           const BlobVec<T>& top) = 0;
  virtual void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                            const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) = 0;
  virtual void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top);
  virtual void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                             const std::vector<bool>& propagate_down, const BlobVec<T>& bottom);

  // Throws a ModelError that names this layer: "layer 'conv1' (Convolution): <what>".
  [[noreturn]] void fail(const std::string& what) const;
  // Adds a learnable parameter blob of the given shape (zeros) and returns it.
  Blob<T>& add_param(const Shape& shape);
  Blob<T>& add_state(const Shape& shape);
  // This layer's backend state of type S, made from `args` on the first call.
  template <typename S, typename... Args>
  S& backend_state(Args&&... args) {
    if (!backend_state_) backend_state_ = std::make_unique<S>(std::forward<Args>(args)...);
    return static_cast<S&>(*backend_state_);
  }

  proto::LayerParameter param_;
  Device* device_;
  Blobs params_;
  Blobs state_;
  std::unique_ptr<LayerBackendState> backend_state_;
  bool forward_only_ = false;  // set_forward_only
  bool defer_param_gradients_ = false;
};

extern template class Layer<float>;
extern template class Layer<double>;

}  // namespace cgdp
