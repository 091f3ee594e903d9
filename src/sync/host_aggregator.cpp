// Host aggregator: arrival bookkeeping, fixed-order OpenMP sums, H2D copies of each sum.
#include "cgdp/sync/host_aggregator.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "cgdp/train/stream_trace.hpp"

namespace cgdp {

HostAggregator::HostAggregator(std::vector<AggregatorWorker> workers, std::vector<ChunkSpan> chunks,
                               int threads, Timeline& timeline, ChunkReducer* reducer, CoreSet cpus)
    : workers_(std::move(workers)),
      chunks_(std::move(chunks)),
      threads_(threads),
      timeline_(timeline),
      reducer_(reducer),
      cpus_(std::move(cpus)),
      arrivals_(chunks_.size(), 0) {
  CGDP_ASSERT(!workers_.empty() && !chunks_.empty());
  const int64_t total = chunks_.back().offset + chunks_.back().count;
  const size_t bytes = static_cast<size_t>(total) * sizeof(float);
  for (const auto& w : workers_) {
    receive_.emplace_back(*w.device, bytes);
    landed_.push_back(w.device->create_event());
  }
  global_ = PinnedHostBuffer(*workers_[0].device, bytes);
  thread_ = std::thread([this] { run(); });
}

HostAggregator::~HostAggregator() { stop(); }

void HostAggregator::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

float* HostAggregator::receive_buffer(int worker, int chunk) {
  return static_cast<float*>(receive_[worker].get()) + chunks_[chunk].offset;
}

void HostAggregator::arrived(int worker, int chunk) {
  {
    std::lock_guard lock(mutex_);
    if (++arrivals_[chunk] == static_cast<int>(workers_.size())) ready_.push_back(chunk);
  }
  changed_.notify_all();
}

std::string HostAggregator::binding_note() const {
  std::lock_guard lock(mutex_);
  if (cpus_.empty()) return "not bound";
  return bind_status_.bound ? cat("bound to cpus ", cpus_.to_string()) : bind_status_.note;
}

void HostAggregator::run() {
  if (!cpus_.empty()) {
    BindStatus status = bind_current_thread(cpus_);
    std::lock_guard lock(mutex_);
    bind_status_ = std::move(status);
  }
  for (;;) {
    int chunk;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      chunk = ready_.front();
      ready_.pop_front();
    }
    try {
      sum_and_send(chunk);
    } catch (...) {
      abort(std::current_exception());
      return;
    }
    std::lock_guard lock(mutex_);
    arrivals_[chunk] = 0;  // H2D copies are issued: the next iteration may reuse the buffers
    ++issued_;
    changed_.notify_all();
  }
}

void HostAggregator::sum_and_send(int chunk) {
  const ChunkSpan& span = chunks_[chunk];
  std::vector<const float*> sources;
  for (size_t w = 0; w < workers_.size(); ++w) sources.push_back(receive_buffer(static_cast<int>(w), chunk));
  float* sum = static_cast<float*>(global_.get()) + span.offset;
  const int64_t begin = timeline_.now_us();
  sum_buffers(sum, sources, span.count, threads_);
  const int64_t end = timeline_.now_us();
  timeline_.add(Timeline::kAggregatorPid, "sum", cat("sum chunk ", chunk), "sum", begin, end,
                {{"chunk", chunk}, {"bytes", span.count * 4}});
  if (reducer_) reducer_->reduce(chunk, sum, span.count);
  const size_t bytes = static_cast<size_t>(span.count) * sizeof(float);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const AggregatorWorker& w = workers_[i];
    traced(*w.h2d, timeline_, static_cast<int>(i), "h2d", cat("h2d chunk ", chunk), "h2d",
           [&] { w.h2d->copy_async(w.device_grads + span.offset, sum, bytes); },
           {{"chunk", chunk}, {"bytes", span.count * 4}});
  }
  std::lock_guard lock(mutex_);
  sum_us_ += end - begin;
}

void HostAggregator::wait_all_issued() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return error_ || issued_ == num_chunks(); });
  if (error_) std::rethrow_exception(error_);
  issued_ = 0;
  last_sum_us_ = sum_us_;
  sum_us_ = 0;
  for (size_t w = 0; w < workers_.size(); ++w) workers_[w].h2d->record(*landed_[w]);
}

void HostAggregator::abort(std::exception_ptr why) {
  {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = why;
  }
  changed_.notify_all();
}

}  // namespace cgdp
