// Image means: each thread sums a contiguous share of the images in double, then the shares add.
#include "cgdp/data/image/image_mean.hpp"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Adds `image` (HWC, RGB or gray) into `sum` (C x H x W, BGR for colour).
void add_image(const Image& image, std::vector<double>& sum) {
  const int C = image.channels, H = image.height, W = image.width;
  for (int c = 0; c < C; ++c) {
    const int source_c = C == 3 ? 2 - c : c;
    double* plane = sum.data() + static_cast<size_t>(c) * H * W;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) plane[static_cast<size_t>(y) * W + x] += image.at(y, x, source_c);
  }
}

}  // namespace

MeanImage compute_image_mean(const ImageSourceDataset& source, int threads) {
  if (source.size() == 0) throw DataError(cat(source.describe(), ": no images to average"));
  const Image first = source.decoded(0);
  MeanImage mean{first.channels, first.height, first.width, {}, source.size()};
  const size_t elements = static_cast<size_t>(mean.channels) * mean.height * mean.width;
  std::vector<std::vector<double>> sums(static_cast<size_t>(std::max(1, threads)),
                                        std::vector<double>(elements, 0.0));
  std::exception_ptr error;
  int64_t error_index = source.size();
#pragma omp parallel for num_threads(static_cast<int>(sums.size())) schedule(static)
  for (int64_t i = 0; i < source.size(); ++i) {
    try {
      const Image image = i == 0 ? first : source.decoded(i);
      if (image.height != first.height || image.width != first.width)
        throw DataError(cat(source.where(i), ": image of ", image.height, "x", image.width, " where ",
                            source.where(0), " is ", first.height, "x", first.width,
                            ": a mean needs one size (give --resize HxW)"));
      add_image(image, sums[static_cast<size_t>(omp_get_thread_num())]);
    } catch (...) {
#pragma omp critical(cgdp_image_mean)
      if (i < error_index) error_index = i, error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  mean.values.resize(elements);
  for (size_t e = 0; e < elements; ++e) {
    double total = 0;
    for (const auto& sum : sums) total += sum[e];
    mean.values[e] = static_cast<float>(total / static_cast<double>(source.size()));
  }
  return mean;
}

}  // namespace cgdp
