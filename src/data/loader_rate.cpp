// The loader's rate: wall time over whole batches taken from a real BatchLoader.
#include "cgdp/data/loader_rate.hpp"

#include <chrono>

#include "cgdp/data/batch_loader.hpp"

namespace cgdp {

LoaderRate measure_loader_rate(std::shared_ptr<const Dataset> data, int64_t batch, int threads,
                               double min_seconds, int min_batches, uint64_t seed,
                               const std::function<void()>& thread_start) {
  LoaderOptions lo;
  lo.global_batch = batch;
  lo.seed = seed;
  lo.threads = threads;
  lo.thread_start = thread_start;
  BatchLoader loader(std::move(data), lo);
  loader.next();  // warm-up: threads started, files in the page cache as they will be
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  LoaderRate rate;
  rate.threads = threads;
  for (int64_t taken = 0;; ++taken) {
    rate.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (taken >= min_batches && rate.seconds >= min_seconds) break;
    rate.images += loader.next().valid;
  }
  rate.images_per_s = static_cast<double>(rate.images) / rate.seconds;
  return rate;
}

}  // namespace cgdp
