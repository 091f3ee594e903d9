// How fast the batch loader fills batches on its own: the decode rate `cgdp profile` records and
// `cgdp loader` prints, so that `cgdp predict` can say how many cores the loader needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "cgdp/data/dataset.hpp"

namespace cgdp {

struct LoaderRate {
  double images_per_s = 0;
  int threads = 1;
  int64_t images = 0;  // measured, after the warm-up batch
  double seconds = 0;
};

// Runs a BatchLoader (shuffled, as training reads) over `data` with `threads` threads, takes one
// batch to warm up, then batches until `min_seconds` have passed and at least `min_batches` were
// taken; the consumer does nothing, so this is the loader's own rate.
LoaderRate measure_loader_rate(std::shared_ptr<const Dataset> data, int64_t batch, int threads,
                               double min_seconds, int min_batches, uint64_t seed,
                               const std::function<void()>& thread_start = {});

}  // namespace cgdp
