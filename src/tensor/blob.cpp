// Blob storage: owned device buffers that grow on reshape, or views into a flat buffer.
#include "cgdp/tensor/blob.hpp"

#include <limits>

#include "cgdp/core/error.hpp"

namespace cgdp {

template <typename T>
Blob<T>::Blob(Device& device, Shape shape, Diff diff) : device_(&device), diff_mode_(diff) {
  reshape(shape);
}

template <typename T>
void Blob<T>::set_channel_block(int64_t block) {
  if (block < 1 || (block > 1 && (shape_.size() != 4 || shape_[1] % block != 0)))
    throw Error(cat("a channel block of ", block, " does not fit shape ", shape_string(shape_)));
  channel_block_ = block;
}

template <typename T>
void Blob<T>::reshape(const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) throw ModelError(cat("negative dimension in shape ", shape_string(shape)));
  const int64_t count = count_of(shape);
  if (count > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(T)))
    throw Error(cat("shape ", shape_string(shape), " has more bytes than 64 bits count"));
  if (is_view() && count != count_)
    throw Error(cat("cannot reshape a view of ", count_, " elements to ", shape_string(shape)));
  shape_ = shape;
  count_ = count;
  if (channel_block_ > 1 && (shape_.size() != 4 || shape_[1] % channel_block_ != 0))
    channel_block_ = 1;
  if (count_ > capacity_) {
    if (data_bound_)
      throw Error(cat("cannot grow a blob to ", shape_string(shape),
                      ": its values live in the net's plan"));
    if (diff_bound_) throw Error(cat("cannot grow a blob to ", shape_string(shape), ": its gradient lives in the net's plan"));
    capacity_ = count_;
    if (values_on_host_) {
      if (device_->holds_data()) host_values_.resize(static_cast<size_t>(capacity_));
      data_ = host_values_.empty() ? nullptr : host_values_.data();
    } else if (!data_deferred_) {
      owned_data_ = DeviceBuffer(*device_, static_cast<size_t>(capacity_) * sizeof(T));
      data_ = static_cast<T*>(owned_data_.get());
    }
    if (has_diff() && !diff_deferred_) {
      owned_diff_ = DeviceBuffer(*device_, static_cast<size_t>(capacity_) * sizeof(T));
      diff_ = static_cast<T*>(owned_diff_.get());
    }
  }
}

template <typename T>
void Blob<T>::bind_to(T* data, T* diff) {
  if (count_ && data_) {
    device_->copy(data, data_, bytes());  // from the host when the values are held there
    if (diff && diff_) device_->copy(diff, diff_, bytes());
  }
  values_on_host_ = false;
  std::vector<T>().swap(host_values_);
  owned_data_.reset();
  owned_diff_.reset();
  capacity_ = count_;
  data_ = data;
  diff_ = diff;
  diff_mode_ = diff ? Diff::Kept : Diff::None;
  diff_deferred_ = false;
  on_host_ = false;
}

template <typename T>
void Blob<T>::bind_diff(T* diff) {
  CGDP_ASSERT(has_diff());
  owned_diff_.reset();
  diff_ = diff;
  diff_bound_ = true;
  diff_deferred_ = false;
}

template <typename T>
void Blob<T>::allocate_deferred_diff() {
  if (!diff_deferred_) return;
  diff_deferred_ = false;
  if (!has_diff() || capacity_ == 0) return;
  owned_diff_ = DeviceBuffer(*device_, static_cast<size_t>(capacity_) * sizeof(T));
  diff_ = static_cast<T*>(owned_diff_.get());
}

template <typename T>
void Blob<T>::drop_deferred_diff() {
  if (!diff_deferred_) return;
  diff_deferred_ = false;
  diff_mode_ = Diff::None;
  owned_diff_.reset();  // the element a blob is made with
  diff_ = nullptr;
}

template <typename T>
void Blob<T>::bind_data(T* data) {
  CGDP_ASSERT(!data_aliased_ && !is_view());
  owned_data_.reset();
  data_ = data;
  data_bound_ = true;
  capacity_ = count_;  // the arena holds this many
}

template <typename T>
void Blob<T>::alias_data(Blob& source) {
  if (has_diff() && source.count_ > capacity_) {
    if (diff_bound_) throw Error(cat("cannot grow a blob to ", shape_string(source.shape_), ": its gradient lives in the net's plan"));
    if (!diff_deferred_) {
      owned_diff_ = DeviceBuffer(*device_, static_cast<size_t>(source.count_) * sizeof(T));
      diff_ = static_cast<T*>(owned_diff_.get());
    }
    capacity_ = source.count_;
  }
  owned_data_.reset();
  shape_ = source.shape_;
  count_ = source.count_;
  channel_block_ = source.channel_block_;  // the same values, so the same layout
  data_ = source.data_;
  data_aliased_ = true;
  data_source_ = &source;
}

template <typename T>
void Blob<T>::share_with(Blob& other) {
  if (other.count() != count_)
    throw ModelError(cat("cannot share a blob of shape ", shape_string(other.shape()),
                         " with one of shape ", shape_string(shape_)));
  values_on_host_ = false;
  std::vector<T>().swap(host_values_);
  owned_data_.reset();
  owned_diff_.reset();
  capacity_ = count_;
  data_ = other.mutable_data();
  diff_ = other.mutable_diff();
  diff_mode_ = other.diff_mode_;
  on_host_ = other.on_host_;
}

template class Blob<float>;
template class Blob<double>;

}  // namespace cgdp
