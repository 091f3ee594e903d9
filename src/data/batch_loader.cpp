// Batch loader: a ring of host buffers filled in order by one thread and handed out in order.
#include "cgdp/data/batch_loader.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

LoaderOptions checked(LoaderOptions options) {
  const int64_t g = options.global_batch;
  if (g <= 0) throw UsageError(cat("loader: global batch ", g, " must be positive"));
  if (options.slice.size == 0) options.slice = {0, g};
  const BatchSlice& s = options.slice;
  if (s.begin < 0 || s.size <= 0 || s.begin + s.size > g)
    throw UsageError(cat("loader: slice [", s.begin, ", ", s.begin + s.size,
                         ") is not inside a global batch of ", g));
  if (options.buffers < 1 || options.threads < 1)
    throw UsageError(cat("loader: needs at least one buffer and one thread, got ", options.buffers,
                         " and ", options.threads));
  return options;
}

}  // namespace

BatchLoader::BatchLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
                         Device& host_memory)
    : dataset_(std::move(dataset)),
      options_(checked(options)),
      sampler_(dataset_->size(), options_.order, options_.seed, options_.start),
      position_(options_.start) {
  const int64_t rows = options_.slice.size;
  slots_.reserve(options_.buffers);
  for (int i = 0; i < options_.buffers; ++i) {
    Slot& slot = slots_.emplace_back();
    slot.images = PinnedHostBuffer(host_memory, rows * dataset_->sample_elements() * sizeof(float));
    slot.labels = PinnedHostBuffer(host_memory, rows * sizeof(float));
    slot.batch.images = static_cast<const float*>(slot.images.get());
    slot.batch.labels = static_cast<const float*>(slot.labels.get());
    slot.batch.rows = rows;
  }
  thread_ = std::thread([this] { produce(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchLoader::produce() {
  if (options_.thread_start) options_.thread_start();
  std::vector<int64_t> indices;
  const int64_t buffers = static_cast<int64_t>(slots_.size());
  try {
    for (int64_t batch = 0;; ++batch) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || batch < released_ + buffers; });
        if (stop_) return;
      }
      fill(slots_[batch % buffers], indices);
      {
        std::lock_guard lock(mutex_);
        produced_ = batch + 1;
      }
      changed_.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

void BatchLoader::fill(Slot& slot, std::vector<int64_t>& indices) {
  const BatchSlice& slice = options_.slice;
  const int64_t global = options_.epoch_end == EpochEnd::PadLastBatch
                             ? std::min(options_.global_batch, sampler_.remaining_in_epoch())
                             : options_.global_batch;
  Batch& batch = slot.batch;
  batch.position = sampler_.position();
  batch.first_sample = sampler_.samples_drawn() + slice.begin;
  indices.clear();
  sampler_.take(global, indices);
  slot.next_position = sampler_.position();

  batch.valid = std::clamp<int64_t>(global - slice.begin, 0, slice.size);
  float* images = static_cast<float*>(slot.images.get());
  float* labels = static_cast<float*>(slot.labels.get());
  const auto rows_of_slice =
      std::span<const int64_t>(indices).subspan(std::min(slice.begin, global), batch.valid);
  // Each row's epoch: the batch may run past the end of one (rows are taken in order).
  std::vector<int64_t> epochs(rows_of_slice.size());
  const int64_t first_row = std::min(slice.begin, global);
  for (size_t r = 0; r < epochs.size(); ++r)
    epochs[r] = batch.position.epoch +
                (batch.position.offset + first_row + static_cast<int64_t>(r)) / dataset_->size();
  read_samples(*dataset_, rows_of_slice, images, labels, options_.threads, epochs);
  const int64_t elements = dataset_->sample_elements();
  std::fill(images + batch.valid * elements, images + batch.rows * elements, 0.f);
  std::fill(labels + batch.valid, labels + batch.rows, 0.f);
}

const Batch& BatchLoader::next() {
  std::unique_lock lock(mutex_);
  if (holding_) {
    ++released_;
    holding_ = false;
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return produced_ > consumed_ || error_; });
  if (produced_ <= consumed_) std::rethrow_exception(error_);
  Slot& slot = slots_[consumed_ % static_cast<int64_t>(slots_.size())];
  ++consumed_;
  holding_ = true;
  position_ = slot.next_position;
  return slot.batch;
}

int64_t BatchLoader::batches_per_epoch() const {
  return (dataset_->size() + options_.global_batch - 1) / options_.global_batch;
}

Shape BatchLoader::batch_shape() const {
  Shape shape = dataset_->sample_shape();
  shape.insert(shape.begin(), options_.slice.size);
  return shape;
}

}  // namespace cgdp
