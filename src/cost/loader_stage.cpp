// The loader stage: a rate per thread against the rate the workers consume at.
#include "cgdp/cost/loader_stage.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"

namespace cgdp {

LoaderPrediction predict_loader(const LoaderCost& loader, int64_t samples, double iteration_us,
                                int threads) {
  CGDP_ASSERT(loader.images_per_s_per_thread > 0 && samples > 0 && iteration_us > 0 && threads > 0);
  LoaderPrediction p;
  p.needed_images_per_s = static_cast<double>(samples) / (iteration_us * 1e-6);
  p.threads_needed = static_cast<int>(std::ceil(p.needed_images_per_s / loader.images_per_s_per_thread));
  p.threads = threads;
  p.images_per_s = loader.images_per_s_per_thread * threads;
  p.loader_bound = p.images_per_s < p.needed_images_per_s;
  p.iteration_us = std::max(iteration_us, static_cast<double>(samples) / p.images_per_s * 1e6);
  return p;
}

}  // namespace cgdp
