// Reading .binaryproto mean images (float or double data, new or legacy shape fields).
#include "cgdp/data/image/mean_file.hpp"

#include <cmath>

#include "cgdp.pb.h"
#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

void load_mean_file(const std::string& path, CaffeTransform& t) {
  if (!t.mean_values.empty())
    throw UsageError(cat(path, ": give a mean file or mean values, not both (as Caffe)"));
  proto::BlobProto blob;
  if (!blob.ParseFromString(read_file(path)))
    throw DataError(cat(path, ": not a Caffe BlobProto (.binaryproto) mean file"));
  int64_t num = blob.num(), c = blob.channels(), h = blob.height(), w = blob.width();
  if (blob.has_shape()) {
    const auto& d = blob.shape().dim();
    if (d.size() != 4 && d.size() != 3)
      throw DataError(cat(path, ": mean blob of ", d.size(), " axes; expected 1 x C x H x W"));
    num = d.size() == 4 ? d[0] : 1;
    c = d[d.size() - 3], h = d[d.size() - 2], w = d[d.size() - 1];
  }
  const int64_t values = blob.data_size() > 0 ? blob.data_size() : blob.double_data_size();
  if (num != 1 || c <= 0 || h <= 0 || w <= 0 || values != c * h * w)
    throw DataError(cat(path, ": mean blob of ", num, "x", c, "x", h, "x", w, " holds ", values,
                        " values; expected 1 x C x H x W with C*H*W values"));
  t.mean_image.resize(static_cast<size_t>(values));
  for (int64_t i = 0; i < values; ++i) {
    t.mean_image[i] = blob.data_size() > 0 ? blob.data(i) : static_cast<float>(blob.double_data(i));
    // A NaN mean makes every input NaN, which had trained to "test accuracy 1".
    if (!std::isfinite(t.mean_image[i]))
      throw DataError(cat(path, ": mean value ", t.mean_image[i], " at element ", i,
                          ": expected finite numbers (a damaged mean file?)"));
  }
  t.mean_height = static_cast<int>(h);
  t.mean_width = static_cast<int>(w);
}

void write_mean_file(const MeanImage& mean, const std::string& path) {
  proto::BlobProto blob;
  blob.set_num(1);
  blob.set_channels(mean.channels);
  blob.set_height(mean.height);
  blob.set_width(mean.width);
  blob.mutable_data()->Add(mean.values.begin(), mean.values.end());
  write_file_atomically(path, blob.SerializeAsString());
}

}  // namespace cgdp
