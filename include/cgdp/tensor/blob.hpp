// Blob: a tensor's values (data) and the gradient of the loss with respect to them (diff), in one
// device's memory. A blob owns its memory, or is a view into a larger buffer (the net's flat
// parameter and gradient buffers), so that whole chunks of parameters move in one copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/tensor/shape.hpp"

namespace cgdp {

// Whether a blob keeps a gradient: activations of a net that runs backward do; a layer's internal
// scratch and the blobs of a net that only runs forward (the test net) need none.
enum class Diff { Kept, None };

template <typename T>
class Blob {
 public:
  explicit Blob(Device& device, Shape shape = {}, Diff diff = Diff::Kept);
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape; an owning blob grows its memory when needed (contents then undefined),
  // a view may only keep its element count.
  void reshape(const Shape& shape);
  void reshape_like(const Blob& other) { reshape(other.shape()); }

  const Shape& shape() const { return shape_; }
  int64_t shape(int axis) const { return shape_[canonical_axis(shape_, axis)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int64_t count() const { return count_; }
  int64_t count(int begin_axis) const { return count_of(shape_, begin_axis, num_axes()); }
  int64_t count(int begin_axis, int end_axis) const { return count_of(shape_, begin_axis, end_axis); }
  size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }
  // How a 4-D blob's values and gradient lie in memory (channel_blocks.hpp): 1, Caffe's NCHW,
  // unless the net chose another. A reshape the block no longer divides goes back to 1.
  int64_t channel_block() const { return channel_block_; }
  void set_channel_block(int64_t block);

  bool has_diff() const { return diff_mode_ == Diff::Kept; }
  const T* data() const { return data_; }
  const T* diff() const { return diff_; }
  T* mutable_data() { return data_; }
  T* mutable_diff() { return diff_; }
  // Host-side spans (CPU backend only: on CUDA these point into device memory).
  std::span<const T> data_span() const { return {data_, static_cast<size_t>(count_)}; }
  std::span<const T> diff_span() const { return {diff_, static_cast<size_t>(count_)}; }
  std::span<T> mutable_data_span() { return {data_, static_cast<size_t>(count_)}; }
  std::span<T> mutable_diff_span() { return {diff_, static_cast<size_t>(count_)}; }

  // Makes this blob a view of external memory (count() elements each), copying its current
  // data there first. Used to gather parameters into one flat buffer; a null `diff` leaves it
  // without a gradient.
  void bind_to(T* data, T* diff);
  // bind_to memory in pinned host memory: no kernel reads it there; its layer brings it through
  // the device in slices (Net's streamed weights, for a weight the run's budget cannot hold).
  void bind_to_host(T* data, T* diff) {
    bind_to(data, diff);
    on_host_ = true;
  }
  bool on_host() const { return on_host_; }
  // Keeps the values in host memory from the next reshape until bind_to or share_with: a layer's
  // parameters are filled there, and no layer's own copy ever sits on the device beside the net's
  // flat buffer (or beside the train net whose parameters a test net shares). A device that holds
  // no data keeps none.
  void hold_values_on_host() { values_on_host_ = true; }
  bool values_on_host() const { return values_on_host_; }
  bool is_view() const {
    return !owned_data_.get() && data_ != nullptr && !data_bound_ && !values_on_host_;
  }
  // Puts the gradient at `diff` (count() elements, memory the net plans and several blobs share
  // at different times), freeing the blob's own. The blob can no longer grow.
  void bind_diff(T* diff);
  bool diff_is_planned() const { return diff_bound_; }
  // Puts the values at `data` (count() elements of an arena the net plans by liveness: other
  // blobs use the bytes while these values are dead or on the host), freeing the blob's own. The
  // contents are not copied; the blob can no longer grow. Blobs aliasing it must alias again.
  void bind_data(T* data);
  bool data_is_planned() const { return data_bound_; }
  // Where a planned net keeps these values in 16 bits (layer_precision()) for backward readers
  // that read them so (Layer::backward_reads_packed): set from their last forward use to their
  // last backward one, when every backward reader does (then the values are never widened back
  // and data() holds other bytes by then); nullptr otherwise. Aliases follow their source.
  const uint16_t* packed_values() const { return data_owner()->packed_values_; }
  void bind_packed_values(const uint16_t* values) { packed_values_ = values; }
  // Allocates no memory until the net has planned it, once every shape is known: the values
  // until bind_data, the gradient until bind_diff or allocate_deferred_diff.
  void defer_memory() { data_deferred_ = diff_deferred_ = true; }
  // The gradient alone: most are placed by the net's gradient plan, so owning one first would
  // only raise the build's peak.
  void defer_diff() { diff_deferred_ = true; }
  bool data_is_deferred() const { return data_deferred_; }
  // A deferred gradient the plan did not place gets memory of its own.
  void allocate_deferred_diff();
  // A deferred gradient no pass reads or writes (the input's data) gets none: has_diff() is false.
  void drop_deferred_diff();
  // The blob whose memory holds these values: this one, or the source of alias_data, followed.
  Blob* data_owner() { return data_source_ ? data_source_->data_owner() : this; }
  const Blob* data_owner() const { return data_source_ ? data_source_->data_owner() : this; }
  Blob* data_source() const { return data_source_; }
  // Reads and writes `source`'s values (Split's fan-out, as Caffe's ShareData): takes its shape
  // and data pointer, frees its own data, keeps its own gradient. Call again after `source`
  // reshapes.
  void alias_data(Blob& source);
  bool data_is_aliased() const { return data_aliased_; }
  // Shares another blob's memory (same count): the test net uses the train net's parameters.
  void share_with(Blob& other);

  Device& device() const { return *device_; }

 private:
  Device* device_;
  Diff diff_mode_;
  bool diff_bound_ = false;  // bind_diff: the gradient is not ours
  bool data_aliased_ = false;  // alias_data: the values are not ours
  bool data_bound_ = false;    // bind_data: the values live in the net's arena
  bool data_deferred_ = false;  // defer_memory: no values of our own until bind_data
  bool diff_deferred_ =
      false;  // defer_memory: no gradient until bind_diff or allocate_deferred_diff
  Blob* data_source_ = nullptr;  // alias_data's source
  Shape shape_;
  int64_t count_ = 0;
  int64_t channel_block_ = 1;
  int64_t capacity_ = 0;
  DeviceBuffer owned_data_;
  DeviceBuffer owned_diff_;
  T* data_ = nullptr;
  T* diff_ = nullptr;
  const uint16_t* packed_values_ = nullptr;
  bool on_host_ = false;         // bind_to_host (or shared with a blob bound there)
  bool values_on_host_ = false;  // hold_values_on_host: data_ points into host_values_
  std::vector<T> host_values_;
};

template <typename T>
using BlobVec = std::vector<Blob<T>*>;

extern template class Blob<float>;
extern template class Blob<double>;

}  // namespace cgdp
