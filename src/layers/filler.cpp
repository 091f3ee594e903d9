// Parameter initialisation with Caffe's rules, drawn from the net's seeded generator.
#include "cgdp/layers/filler.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cgdp {

namespace {

template <typename T>
double fan_scale_n(const Blob<T>& blob, proto::FillerParameter::VarianceNorm norm) {
  const double count = static_cast<double>(blob.count());
  const double fan_in = count / static_cast<double>(blob.shape(0));
  const double fan_out = blob.num_axes() > 1 ? count / static_cast<double>(blob.shape(1)) : count;
  switch (norm) {
    case proto::FillerParameter::FAN_OUT: return fan_out;
    case proto::FillerParameter::AVERAGE: return (fan_in + fan_out) / 2.0;
    default: return fan_in;
  }
}

}  // namespace

template <typename T>
void fill(Blob<T>& blob, const proto::FillerParameter& filler, Rng& rng) {
  const std::string& type = filler.type();
  if (type != "constant" && type != "gaussian" && type != "uniform" && type != "xavier" &&
      type != "msra" && type != "bilinear" && type != "positive_unitball")
    throw Error(cat("unknown filler type '", type,
                    "' (known: constant, gaussian, uniform, xavier, msra, bilinear, positive_unitball)"));
  if (type == "bilinear" && (blob.num_axes() != 4 || blob.shape(2) != blob.shape(3)))
    throw Error(cat("the bilinear filler needs a square 4-D kernel (N x C x K x K), got ", shape_string(blob.shape())));
  if (type == "gaussian" && filler.sparse() >= 0 && blob.num_axes() < 1)
    throw Error("a sparse gaussian filler needs a blob with outputs (at least one axis)");
  if (!blob.device().holds_data()) return;  // measuring a net's memory: no values to draw
  // Drawn on the host in one order whatever the backend, then copied: the same values everywhere.
  std::vector<T> values(static_cast<size_t>(blob.count()));
  if (type == "constant") {
    for (T& v : values) v = static_cast<T>(filler.value());
  } else if (type == "gaussian") {
    std::normal_distribution<double> dist(filler.mean(), filler.std());
    for (T& v : values) v = static_cast<T>(dist(rng));
    if (filler.sparse() >= 0) {  // Caffe: each weight kept with probability sparse / outputs
      std::bernoulli_distribution keep(std::min(1.0, filler.sparse() / static_cast<double>(blob.shape(0))));
      for (T& v : values) v = keep(rng) ? v : T(0);
    }
  } else if (type == "bilinear") {  // Caffe's upsampling kernel for a Deconvolution of stride f
    const int64_t k = blob.shape(3);
    const double f = std::ceil(k / 2.0), c = (2 * f - 1 - std::fmod(f, 2.0)) / (2 * f);
    for (size_t i = 0; i < values.size(); ++i) {
      const double x = static_cast<double>(static_cast<int64_t>(i) % k), y = static_cast<double>(static_cast<int64_t>(i) / k % k);
      values[i] = static_cast<T>((1 - std::abs(x / f - c)) * (1 - std::abs(y / f - c)));
    }
  } else if (type == "positive_unitball") {  // uniform in [0, 1), each output's weights summing to 1
    std::uniform_real_distribution<double> dist(0, 1);
    for (T& v : values) v = static_cast<T>(dist(rng));
    const size_t outputs = static_cast<size_t>(blob.num_axes() > 0 ? blob.shape(0) : 1), dim = values.size() / outputs;
    for (size_t o = 0; o < outputs; ++o) {
      double sum = 0;
      for (size_t j = 0; j < dim; ++j) sum += values[o * dim + j];
      for (size_t j = 0; j < dim; ++j) values[o * dim + j] = static_cast<T>(values[o * dim + j] / sum);
    }
  } else if (type == "uniform") {
    std::uniform_real_distribution<double> dist(filler.min(), filler.max());
    for (T& v : values) v = static_cast<T>(dist(rng));
  } else if (type == "xavier") {
    const double scale = std::sqrt(3.0 / fan_scale_n(blob, filler.variance_norm()));
    std::uniform_real_distribution<double> dist(-scale, scale);
    for (T& v : values) v = static_cast<T>(dist(rng));
  } else {  // msra
    std::normal_distribution<double> dist(0.0, std::sqrt(2.0 / fan_scale_n(blob, filler.variance_norm())));
    for (T& v : values) v = static_cast<T>(dist(rng));
  }
  blob.device().copy(blob.mutable_data(), values.data(), blob.bytes());
}

template void fill<float>(Blob<float>&, const proto::FillerParameter&, Rng&);
template void fill<double>(Blob<double>&, const proto::FillerParameter&, Rng&);

}  // namespace cgdp
