// Plan sets: words and --chunk values to candidate plans, deduplicated and ordered fine to coarse.
#include "cgdp/cost/plan_set.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/plan_search.hpp"
#include "cgdp/cost/simulator.hpp"

namespace cgdp {

namespace {

constexpr const char* kItems =
    "'equal', 'equal:A-B', 'best' or a --chunk value ('layer', 'all', K, 'bytes:MB', 'b1,b2,...')";

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || next != end) return std::nullopt;
  return value;
}

// "A-B" of "equal:A-B", checked: 1 <= A <= B.
std::pair<int64_t, int64_t> parse_k_range(const std::string& item, const std::string& flag) {
  const std::string_view range = std::string_view(item).substr(6);
  const size_t dash = range.find('-');
  const auto a = parse_int(range.substr(0, dash));
  const auto b = dash == std::string_view::npos ? std::nullopt : parse_int(range.substr(dash + 1));
  if (!a || !b || *a < 1 || *b < *a)
    throw UsageError(cat(flag, ": '", item, "': expected equal:A-B with chunk sizes 1 <= A <= B"));
  return {*a, *b};
}

std::vector<int> starts_of(const ChunkPlan& plan) {
  std::vector<int> starts;
  for (const Chunk& c : plan.chunks) starts.push_back(c.first);
  return starts;
}

// The candidates one item names.
std::vector<PlanCandidate> expand(std::span<const ParamLayer> layers, const std::string& item,
                                  const CostInputs* inputs, const std::string& flag) {
  const int64_t n = static_cast<int64_t>(layers.size());
  if (item == "equal" || item.starts_with("equal:")) {
    const auto [a, b] =
        item == "equal" ? std::pair<int64_t, int64_t>{1, n} : parse_k_range(item, flag);
    std::vector<PlanCandidate> out;
    for (int64_t k = a; k <= std::min(b, std::max<int64_t>(n, 1)); ++k)
      out.push_back({std::to_string(k), equal_size_plan(layers, k)});
    return out;
  }
  if (item == "best") {
    if (!inputs) throw UsageError(cat(flag, ": 'best' needs a profile (give --profile P.json)"));
    PlanCandidate best{"", best_plan(*inputs).best.plan};
    best.spec = plan_spec(best.plan, static_cast<int>(n));
    best.predicted_best = true;
    return {best};
  }
  const bool plan_like = item == "layer" || item == "all" || item.starts_with("bytes:") ||
                         item.find(',') != std::string::npos || parse_int(item).has_value();
  if (!plan_like) throw UsageError(cat(flag, ": '", item, "' is not a plan: expected ", kItems));
  try {
    return {{item, make_chunk_plan(layers, item)}};
  } catch (const UsageError& e) {
    throw UsageError(cat(flag, ": ", e.what()));
  }
}

}  // namespace

std::vector<PlanCandidate> make_plan_set(std::span<const ParamLayer> layers,
                                         std::span<const std::string> items,
                                         const CostInputs* inputs, const std::string& flag) {
  if (items.empty()) throw UsageError(cat(flag, ": no plans given; expected ", kItems));
  std::vector<PlanCandidate> set;
  for (const std::string& item : items)
    for (PlanCandidate& c : expand(layers, item, inputs, flag)) {
      auto same = std::find_if(set.begin(), set.end(), [&](const PlanCandidate& s) {
        return starts_of(s.plan) == starts_of(c.plan);
      });
      if (same != set.end()) {
        same->predicted_best |= c.predicted_best;
        continue;
      }
      if (inputs) c.predicted_ms = simulate_cgdp(*inputs, c.plan).iteration_us / 1e3;
      set.push_back(std::move(c));
    }
  std::stable_sort(set.begin(), set.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    return a.chunks() > b.chunks();
  });
  return set;
}

int predicted_best_index(std::span<const PlanCandidate> candidates) {
  int best = 0;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    if (candidates[i].predicted_best) return i;
    if (candidates[i].predicted_ms < candidates[best].predicted_ms) best = i;
  }
  return best;
}

double mean_chunk_size(const PlanCandidate& candidate, int num_layers) {
  return candidate.chunks() > 0 ? static_cast<double>(num_layers) / candidate.chunks() : 0;
}

}  // namespace cgdp
