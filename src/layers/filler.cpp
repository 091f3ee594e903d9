// Parameter initialisation with Caffe's rules, drawn from the net's seeded generator.
#include "cgdp/layers/filler.hpp"

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
      type != "msra")
    throw Error(
        cat("unknown filler type '", type, "' (known: constant, gaussian, uniform, xavier, msra)"));
  if (!blob.device().holds_data()) return;  // measuring a net's memory: no values to draw
  // Drawn on the host in one order whatever the backend, then copied: the same values everywhere.
  std::vector<T> values(static_cast<size_t>(blob.count()));
  if (type == "constant") {
    for (T& v : values) v = static_cast<T>(filler.value());
  } else if (type == "gaussian") {
    std::normal_distribution<double> dist(filler.mean(), filler.std());
    for (T& v : values) v = static_cast<T>(dist(rng));
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
