// DummyData's samples: filler values drawn from counters, so any thread reads any sample alike.
#include "cgdp/data/filler_dataset.hpp"

#include <cmath>
#include <numbers>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

void check_filler(const ValueFiller& f, const std::string& what, const std::string& where) {
  if (f.type != "constant" && f.type != "uniform" && f.type != "gaussian")
    throw DataError(cat(where, ": ", what, " filler '", f.type,
                        "' (DummyData fills with constant, uniform or gaussian)"));
  if (f.type == "uniform" && !(f.min <= f.max))
    throw DataError(cat(where, ": ", what, " filler uniform needs min <= max"));
}

// Element i of a filler under `rng`: Box-Muller for gaussian, two uniforms per value.
float fill(const ValueFiller& f, const CounterRng& rng, uint64_t i) {
  if (f.type == "constant") return f.value;
  const double u = rng.uniform(2 * i);
  if (f.type == "uniform") return static_cast<float>(f.min + (f.max - f.min) * u);
  const double v = rng.uniform(2 * i + 1);
  const double normal = std::sqrt(-2.0 * std::log1p(-u)) * std::cos(2 * std::numbers::pi * v);
  return static_cast<float>(f.mean + f.std * normal);
}

}  // namespace

FillerDataset::FillerDataset(FillerDatasetSpec spec) : spec_(std::move(spec)) {
  check_filler(spec_.data, "data", spec_.description);
  check_filler(spec_.label, "label", spec_.description);
  if (spec_.label.type == "constant" &&
      (spec_.label.value < 0 || spec_.label.value >= static_cast<float>(spec_.num_classes) ||
       spec_.label.value != std::floor(spec_.label.value)))
    throw DataError(cat(spec_.description, ": label filler value ", spec_.label.value,
                        " is not a class of the model (0 to ", spec_.num_classes - 1, ")"));
  if (spec_.size <= 0) throw DataError(cat(spec_.description, ": no samples (batch_size 0?)"));
}

void FillerDataset::read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  const CounterRng rng({spec_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index)});
  const int64_t n = sample_elements();
  for (int64_t i = 0; i < n; ++i) image_out[i] = fill(spec_.data, rng, static_cast<uint64_t>(i));
  if (spec_.label.type == "constant") {
    *label_out = spec_.label.value;
    return;
  }
  // A random label filler gives a uniform class, as a classifier's labels must be classes.
  const CounterRng label_rng({spec_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index), 1});
  *label_out = static_cast<float>(label_rng.bits(0) % static_cast<uint64_t>(spec_.num_classes));
}

}  // namespace cgdp
