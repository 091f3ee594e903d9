// Chunk plans: the --chunk forms, each reduced to a list of chunk starts over the param layers.
#include "cgdp/sync/chunk_plan.hpp"

#include <charconv>
#include <cmath>
#include <optional>

#include "cgdp/core/error.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {

namespace {

constexpr const char* kForms =
    "'layer', 'all', a chunk size K (positive integer), 'bytes:MB' (MiB, positive) or chunk starts "
    "'b1,b2,...'";

// The whole of `text` as a number of type V, or nullopt.
template <typename V>
std::optional<V> parse_whole(std::string_view text) {
  V value{};
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || next != end) return std::nullopt;
  return value;
}

UsageError chunk_error(const std::string& spec, const std::string& what) {
  return UsageError(cat("--chunk '", spec, "': ", what));
}

// Checks that the list is contiguous in the flat buffers and in backward order: chunks rely on it.
void check_layers(std::span<const ParamLayer> layers) {
  for (size_t i = 1; i < layers.size(); ++i) {
    CGDP_ASSERT(layers[i].offset == layers[i - 1].offset + layers[i - 1].count);
    CGDP_ASSERT(layers[i].layer < layers[i - 1].layer);
  }
}

// Chunks from explicit starts; `starts` are already checked by the caller.
ChunkPlan chunks_from_starts(std::span<const ParamLayer> layers, const std::vector<int>& starts) {
  check_layers(layers);
  ChunkPlan plan;
  const int n = static_cast<int>(layers.size());
  for (size_t c = 0; c < starts.size(); ++c) {
    const int first = starts[c];
    const int last = (c + 1 < starts.size() ? starts[c + 1] : n) - 1;
    Chunk chunk{first, last, layers[first].offset, 0, layers[last].layer};
    chunk.count = layers[last].offset + layers[last].count - chunk.offset;
    plan.chunks.push_back(chunk);
  }
  return plan;
}

// "b1,b2,..." (a trailing comma allowed) with every start checked against (0, L).
std::vector<int64_t> parse_starts(const std::string& spec, int64_t num_layers) {
  std::string_view rest = spec;
  if (rest.back() == ',') rest.remove_suffix(1);
  std::vector<int64_t> starts;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto value = parse_whole<int64_t>(item);
    if (!value)
      throw chunk_error(spec,
                        cat("'", item, "' is not an integer; expected chunk starts b1,b2,..."));
    if (*value < 1 || *value >= num_layers)
      throw chunk_error(spec, cat("chunk start ", *value, " is out of range: ",
                                  num_layers < 2 ? "no start fits"
                                                 : cat("starts must lie in 1..", num_layers - 1),
                                  " (", num_layers, " param layers)"));
    if (!starts.empty() && *value <= starts.back())
      throw chunk_error(spec, cat("chunk starts must be strictly increasing, but ", *value,
                                  " follows ", starts.back()));
    starts.push_back(*value);
    if (comma == std::string_view::npos) return starts;
    rest.remove_prefix(comma + 1);
  }
}

std::string layer_names(const Chunk& chunk, std::span<const ParamLayer> layers) {
  if (chunk.first == chunk.last) return layers[chunk.first].name;
  const char* separator = chunk.last == chunk.first + 1 ? " " : "..";
  return cat(layers[chunk.first].name, separator, layers[chunk.last].name);
}

}  // namespace

template <typename T>
std::vector<ParamLayer> param_layers(const Net<T>& net) {
  std::vector<ParamLayer> layers;
  for (int i = net.num_layers() - 1; i >= 0; --i) {
    const auto [begin, end] = net.layer_param_range(i);
    if (end <= begin) continue;
    ParamLayer p{i, net.layer(i).name(), begin, end - begin, {}};
    // The weight must be the layer's own and first in its range: a shared weight's gradient adds
    // other layers' contributions, which its factors do not carry; a streamed one is not there.
    const auto* factored = dynamic_cast<const SufficientFactors<T>*>(&net.layer(i));
    if (factored && !net.param_shared(i, 0) && net.batch_size() > 0 &&
        !net.layer(i).params()[0]->on_host()) {
      p.factors = factored->factor_shape();
      p.factors.rows /= net.batch_size();
    }
    layers.push_back(p);
  }
  return layers;
}

ChunkPlan per_layer_plan(std::span<const ParamLayer> layers) {
  std::vector<int> starts(layers.size());
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = static_cast<int>(i);
  return chunks_from_starts(layers, starts);
}

ChunkPlan single_chunk_plan(std::span<const ParamLayer> layers) {
  return chunks_from_starts(layers, layers.empty() ? std::vector<int>{} : std::vector<int>{0});
}

ChunkPlan equal_size_plan(std::span<const ParamLayer> layers, int64_t k) {
  CGDP_ASSERT(k > 0);
  const int64_t n = static_cast<int64_t>(layers.size());
  const int64_t full = n > 0 ? (n - 1) / k : 0;  // chunks of k; the rest go one per chunk
  std::vector<int> starts;
  for (int64_t c = 0; c < full; ++c) starts.push_back(static_cast<int>(c * k));
  for (int64_t i = full * k; i < n; ++i) starts.push_back(static_cast<int>(i));
  return chunks_from_starts(layers, starts);
}

std::string default_chunk_spec(DeviceKind kind) {
  return kind == DeviceKind::Cuda ? cat("bytes:", kDefaultCudaChunkMiB) : "layer";
}

ChunkPlan byte_capped_plan(std::span<const ParamLayer> layers, double cap_bytes) {
  CGDP_ASSERT(cap_bytes > 0);
  std::vector<int> starts;
  double filled = 0;  // bytes in the open chunk
  for (size_t i = 0; i < layers.size(); ++i) {
    const double bytes = static_cast<double>(layers[i].count) * sizeof(float);
    if (starts.empty() || filled + bytes > cap_bytes) {
      starts.push_back(static_cast<int>(i));
      filled = 0;
    }
    filled += bytes;
  }
  return chunks_from_starts(layers, starts);
}

ChunkPlan plan_from_starts(std::span<const ParamLayer> layers, std::span<const int64_t> starts) {
  std::vector<int> all;
  if (!layers.empty()) all.push_back(0);
  for (const int64_t start : starts) {
    CGDP_ASSERT(!all.empty() && start > all.back() && start < static_cast<int64_t>(layers.size()));
    all.push_back(static_cast<int>(start));
  }
  return chunks_from_starts(layers, all);
}

ChunkPlan make_chunk_plan(std::span<const ParamLayer> layers, const std::string& spec) {
  if (spec == "layer") return per_layer_plan(layers);
  if (spec == "all") return single_chunk_plan(layers);
  if (spec.starts_with("bytes:")) {
    const auto mib = parse_whole<double>(std::string_view(spec).substr(6));
    if (!mib || !std::isfinite(*mib) || *mib <= 0)
      throw chunk_error(spec, "expected bytes:MB with MB a positive number of MiB");
    return byte_capped_plan(layers, *mib * 1024 * 1024);
  }
  if (spec.find(',') != std::string::npos)
    return plan_from_starts(layers, parse_starts(spec, static_cast<int64_t>(layers.size())));
  if (const auto k = parse_whole<int64_t>(spec)) {
    if (*k <= 0) throw chunk_error(spec, "the chunk size K must be a positive integer");
    return equal_size_plan(layers, *k);
  }
  throw chunk_error(spec, cat("expected ", kForms));
}

std::string describe(const ChunkPlan& plan, std::span<const ParamLayer> layers, int max_shown) {
  CGDP_ASSERT(max_shown >= 3);
  const int n = static_cast<int>(plan.chunks.size());
  std::string text = cat(n, n == 1 ? " chunk:" : " chunks:");
  const int head = n > max_shown ? max_shown - 2 : n;  // elided plans end with their last two
  for (int c = 0; c < n; ++c) {
    if (c == head && head < n) {
      text += " ...";
      c = n - 2;
    }
    text += cat(" [", layer_names(plan.chunks[c], layers), "]");
  }
  return text;
}

template std::vector<ParamLayer> param_layers(const Net<float>& net);
template std::vector<ParamLayer> param_layers(const Net<double>& net);

}  // namespace cgdp
