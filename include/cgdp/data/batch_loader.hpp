// Prefetching batch loader: a background thread assembles the next batches into host buffers
// while the trainer consumes the current one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cgdp/data/dataset.hpp"
#include "cgdp/data/sampler.hpp"
#include "cgdp/device/cpu_device.hpp"

namespace cgdp {

// What happens when an epoch has fewer samples left than a global batch.
enum class EpochEnd {
  Continue,      // the batch goes on into the next epoch's order (training)
  PadLastBatch,  // the batch stops at the epoch's end; its missing rows are zero (evaluation)
};

struct LoaderOptions {
  int64_t global_batch = 0;  // samples per step over all workers
  BatchSlice slice;          // the rows this loader fills; size 0 means the whole global batch
  Order order = Order::Shuffled;
  EpochEnd epoch_end = EpochEnd::Continue;
  uint64_t seed = 0;
  SamplerPosition start;  // a saved position() to resume from
  int buffers = 2;        // host buffers: one is consumed while the others fill
  int threads = 1;        // threads filling one batch (an OpenMP team of the loader's thread)
  // Runs first on the loader's thread, e.g. to bind it to cores: its team's threads, made by
  // it, inherit the binding.
  std::function<void()> thread_start;
};

// One batch (this loader's slice of a global batch), in host memory owned by the loader.
struct Batch {
  const float* images = nullptr;  // [rows, C, H, W]
  const float* labels = nullptr;  // [rows]
  int64_t rows = 0;
  // Rows holding samples; fewer than `rows` only for the last batch of an epoch under
  // EpochEnd::PadLastBatch, whose other rows are zero (leave them out of metrics).
  int64_t valid = 0;
  // Samples drawn before this batch's first row over the whole run (epoch * dataset size +
  // offset + slice begin): equal to iteration * global batch + slice begin when training from
  // the start, so per-sample randomness such as dropout masks can be keyed on it.
  int64_t first_sample = 0;
  SamplerPosition position;  // where the global batch this slice belongs to starts
};

class BatchLoader {
 public:
  // Host buffers come from `host_memory`'s pinned allocator so that a GPU can copy them
  // asynchronously. Throws UsageError for bad options, DataError for an empty dataset.
  BatchLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
              Device& host_memory = default_cpu_device());
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Waits for the next batch. The batch and its memory stay valid until the next call. An error
  // raised while loading (by this batch or an earlier prefetched one) is rethrown here, and
  // again on every later call.
  const Batch& next();
  // Where the batch that next() returns next starts; not how far the prefetcher has read. Save
  // it in a checkpoint and pass it as LoaderOptions::start to resume bit for bit. Call it from
  // the thread that calls next().
  SamplerPosition position() const { return position_; }
  // Global batches in one pass over the data: ceil(dataset size / global batch).
  int64_t batches_per_epoch() const;
  // {rows, C, H, W} of Batch::images.
  Shape batch_shape() const;
  const Dataset& dataset() const { return *dataset_; }

 private:
  struct Slot {
    PinnedHostBuffer images, labels;
    Batch batch;
    SamplerPosition next_position;  // position after this batch
  };

  void produce();
  void fill(Slot& slot, std::vector<int64_t>& indices);

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  Sampler sampler_;  // used by the loader thread only
  std::vector<Slot> slots_;
  SamplerPosition position_;  // consumer side

  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t produced_ = 0;  // batches filled
  int64_t consumed_ = 0;  // batches handed out by next()
  int64_t released_ = 0;  // batches whose slot may be refilled
  bool holding_ = false;  // the consumer still uses batch consumed_ - 1
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace cgdp
