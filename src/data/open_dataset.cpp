// Dataset specs: "scheme:argument" strings dispatched to the readers.
#include "cgdp/data/open_dataset.hpp"

#include <charconv>

#include "cgdp/core/error.hpp"
#include "cgdp/data/cifar10_dataset.hpp"
#include "cgdp/data/idx_dataset.hpp"

namespace cgdp {

namespace {

constexpr const char* kKnownSchemes = "idx:DIR, cifar10:DIR, synthetic, synthetic:C,H,W,CLASSES";

// Parses "C,H,W,CLASSES" into `spec`.
void parse_synthetic_shape(const std::string& text, const std::string& whole, SyntheticSpec& spec) {
  int64_t values[4];
  const char* at = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 4; ++i) {
    auto [next, error] = std::from_chars(at, end, values[i]);
    const bool separator_ok = i < 3 ? (next != end && *next == ',') : next == end;
    if (error != std::errc() || !separator_ok)
      throw UsageError(
          cat("data source '", whole, "': expected synthetic:C,H,W,CLASSES with four integers"));
    at = next + 1;
  }
  spec.channels = values[0];
  spec.height = values[1];
  spec.width = values[2];
  spec.num_classes = static_cast<int>(values[3]);
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split,
                                      const SyntheticSpec& synthetic_defaults) {
  const size_t colon = spec.find(':');
  const std::string scheme = spec.substr(0, colon);
  const std::string argument = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const bool has_argument = colon != std::string::npos;

  if (scheme == "synthetic") {
    SyntheticSpec synthetic = synthetic_defaults;
    if (has_argument) parse_synthetic_shape(argument, spec, synthetic);
    if (split == Split::Test) synthetic.seed += 1;
    return std::make_unique<SyntheticDataset>(synthetic);
  }
  if ((scheme == "idx" || scheme == "cifar10") && argument.empty())
    throw UsageError(cat("data source '", spec, "': expected ", scheme, ":DIR"));
  if (scheme == "idx") return std::make_unique<InMemoryDataset>(load_idx_dataset(argument, split));
  if (scheme == "cifar10")
    return std::make_unique<InMemoryDataset>(load_cifar10_dataset(argument, split));
  throw UsageError(
      cat("data source '", spec, "': unknown scheme '", scheme, "'; known: ", kKnownSchemes));
}

}  // namespace cgdp
