// Profile JSON: reading with one-line errors naming the file and the field, and atomic writing.
#include <nlohmann/json.hpp>
#include <set>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/profile.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/json_message.hpp"

namespace cgdp {

namespace {

// What a profile's numbers may be: past these no machine is described (a link of 1e-300 GB/s,
// 2^32 loader threads), and the event simulation would not end.
constexpr double kMinRate = 1e-3;  // GB/s
constexpr double kMaxRate = 1e6;
constexpr double kMaxNumber = 1e9;  // microseconds, images/s, factors
constexpr int64_t kMaxCount = int64_t{1} << 20;  // threads, devices, samples, inputs

using nlohmann::json;

// One JSON object being read: every access names the file and the field's path on failure, and
// finish() rejects fields nobody asked for (a misspelt field is an error, not a silent default).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, const std::string& file)
      : object_(object), path_(std::move(path)), file_(file) {
    if (!object_.is_object()) throw error(path_, "expected an object");
  }

  DataError error(const std::string& field, const std::string& what) const {
    return DataError(field.empty() ? cat(file_, ": ", what) : cat(file_, ": ", field, ": ", what));
  }
  std::string field(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  const json& get(const std::string& key, bool optional = false) {
    seen_.insert(key);
    const auto it = object_.find(key);
    if (it == object_.end()) {
      if (optional) return null_;
      throw error(field(key), "missing");
    }
    return *it;
  }

  bool has(const std::string& key) const { return object_.contains(key); }

  // A number with value > `min` (strict) or >= `min`, and at most kMaxNumber: times and factors
  // past it cannot describe a machine, and the simulation would not end on them.
  double number(const std::string& key, double min, bool strict, bool optional = false) {
    const json& value = get(key, optional);
    if (value.is_null() && optional) return 0;
    const char* relation = strict ? "> " : ">= ";
    if (!value.is_number() || (strict ? value.get<double>() <= min : value.get<double>() < min) ||
        !(value.get<double>() <= kMaxNumber))
      throw error(field(key),
                  cat("expected a number ", relation, min, " and at most ", kMaxNumber));
    return value.get<double>();
  }

  // A bandwidth (GB/s, or Gbit/s for the network) a machine can have: kMinRate to kMaxRate.
  double rate(const std::string& key) {
    const json& value = get(key);
    if (!value.is_number() || !(value.get<double>() >= kMinRate && value.get<double>() <= kMaxRate))
      throw error(field(key), cat("expected a bandwidth from ", kMinRate, " to ", kMaxRate));
    return value.get<double>();
  }

  int64_t integer(const std::string& key, int64_t min, bool optional = false,
                  int64_t max = kMaxCount) {
    const json& value = get(key, optional);
    if (value.is_null() && optional) return 0;
    if (!value.is_number_integer() || value.get<int64_t>() < min || value.get<int64_t>() > max)
      throw error(field(key), cat("expected an integer from ", min, " to ", max));
    return value.get<int64_t>();
  }

  std::string string(const std::string& key) {
    const json& value = get(key);
    if (!value.is_string()) throw error(field(key), "expected a string");
    return value.get<std::string>();
  }

  const json& array(const std::string& key) {
    const json& value = get(key);
    if (!value.is_array() || value.empty()) throw error(field(key), "expected a non-empty array");
    return value;
  }

  LinkCost link(const std::string& key) {
    ObjectReader r(get(key), field(key), file_);
    LinkCost link{r.rate("gbps"), r.number("latency_us", 0, false)};
    r.finish();
    return link;
  }

  // An optional object: absent gives nullopt.
  std::optional<NetworkCost> network(const std::string& key) {
    if (get(key, /*optional=*/true).is_null()) return std::nullopt;
    ObjectReader r(get(key), field(key), file_);
    NetworkCost network{r.rate("gbit_per_s"), r.number("latency_us", 0, false)};
    r.finish();
    return network;
  }

  std::optional<LoaderCost> loader(const std::string& key) {
    if (get(key, /*optional=*/true).is_null()) return std::nullopt;
    ObjectReader r(get(key), field(key), file_);
    LoaderCost loader{r.number("images_per_s_per_thread", 0, true),
                      static_cast<int>(r.integer("threads", 1)), r.string("data")};
    r.finish();
    return loader;
  }

  void finish() const {
    for (const auto& [key, value] : object_.items())
      if (!seen_.contains(key)) throw error(field(key), "unknown field");
  }

 private:
  const json& object_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> seen_;
  const json null_;
};

LayerCost read_layer(const json& value, const std::string& path, const std::string& file) {
  ObjectReader r(value, path, file);
  LayerCost layer;
  layer.name = r.string("name");
  if (layer.name.empty()) throw r.error(r.field("name"), "expected a non-empty string");
  layer.type = r.string("type");
  layer.forward_us = r.number("forward_us", 0, false);
  layer.backward_us = r.number("backward_us", 0, false);
  layer.param_bytes = r.integer("param_bytes", 0, false, int64_t{1} << 40);
  if (layer.param_bytes % 4 != 0)
    throw r.error(r.field("param_bytes"), "expected a multiple of 4 (float parameters)");
  r.finish();
  return layer;
}

std::vector<LayerCost> read_layers(ObjectReader& r, const std::string& file) {
  std::vector<LayerCost> layers;
  std::set<std::string> names;
  const json& array = r.array("layers");
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = cat("layers[", i, "]");
    layers.push_back(read_layer(array[i], path, file));
    if (!names.insert(layers.back().name).second)
      throw r.error(path + ".name", cat("layer '", layers.back().name, "' appears twice"));
  }
  return layers;
}

std::vector<HostSumCost> read_host_sums(ObjectReader& r, int devices, const std::string& file) {
  std::vector<HostSumCost> sums;
  const json& array = r.array("host_sum");
  bool has_devices = false;
  for (size_t i = 0; i < array.size(); ++i) {
    ObjectReader s(array[i], cat("host_sum[", i, "]"), file);
    sums.push_back({static_cast<int>(s.integer("inputs", 1)), s.rate("gbps")});
    s.finish();
    has_devices |= sums.back().inputs == devices;
  }
  if (!has_devices)
    throw r.error("host_sum", cat("expected an entry with inputs = devices (", devices, ")"));
  return sums;
}

Profile parse_profile(const json& root, const std::string& file) {
  ObjectReader r(root, "", file);
  Profile p;
  p.version = static_cast<int>(r.integer("version", 1));
  if (p.version != 1) throw r.error("version", cat("expected 1, got ", p.version));
  p.model = r.string("model");
  p.backend = r.string("backend");
  if (p.backend != "cpu" && p.backend != "cuda")
    throw r.error("backend", "expected \"cpu\" or \"cuda\"");
  p.device = r.string("device");
  if (r.has("precision")) p.precision = r.string("precision");
  p.devices = static_cast<int>(r.integer("devices", 1));
  p.batch = static_cast<int>(r.integer("batch", 1));
  p.host_threads = static_cast<int>(r.integer("host_threads", 1));
  p.layers = read_layers(r, file);
  p.d2h = r.link("d2h");
  p.h2d = r.link("h2d");
  p.p2p = r.link("p2p");
  p.sync_us = r.number("sync_us", 0, false);
  p.overlap_us_per_mb = r.number("overlap_us_per_mb", 0, false, /*optional=*/true);
  p.host_sum = read_host_sums(r, p.devices, file);
  p.update_gbps = r.rate("update_gbps");
  p.device_sum_gbps = r.rate("device_sum_gbps");
  p.host_memory_gbps = r.number("host_memory_gbps", 0, false, /*optional=*/true);
  const double shared = p.host_memory_gbps;
  if (shared != 0 && !(shared >= kMinRate && shared <= kMaxRate))
    throw r.error("host_memory_gbps", cat("expected 0 (unshared) or a bandwidth from ", kMinRate,
                                          " to ", kMaxRate));
  p.shared_cores = static_cast<int>(r.integer("shared_cores", 0, /*optional=*/true));
  if (r.has("contention_factor")) p.contention_factor = r.number("contention_factor", 0, false);
  if (r.has("exchange_stretch")) p.exchange_stretch = r.number("exchange_stretch", 1, false);
  if (r.has("rebuild_bf16_speedup"))
    p.rebuild_bf16_speedup = r.number("rebuild_bf16_speedup", 0.01, false);
  p.network = r.network("network");
  p.loader = r.loader("loader");
  r.finish();
  p.source = file;
  return p;
}

// Written in the schema's order (docs/profile.md), not sorted.
using ordered_json = nlohmann::ordered_json;

ordered_json link_json(const LinkCost& link) {
  return {{"gbps", link.gbps}, {"latency_us", link.latency_us}};
}

}  // namespace

Profile read_profile(const std::string& path) {
  const std::string text = read_file(path);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers past a double (1e999)
    throw DataError(cat(path, ": not valid JSON: ", json_message(e)));
  }
  return parse_profile(root, path);
}

void write_profile(const Profile& p, const std::string& path) {
  ordered_json layers = ordered_json::array();
  for (const LayerCost& l : p.layers)
    layers.push_back({{"name", l.name},
                      {"type", l.type},
                      {"forward_us", l.forward_us},
                      {"backward_us", l.backward_us},
                      {"param_bytes", l.param_bytes}});
  ordered_json sums = ordered_json::array();
  for (const HostSumCost& s : p.host_sum) sums.push_back({{"inputs", s.inputs}, {"gbps", s.gbps}});
  ordered_json root = {{"version", p.version},
                       {"model", p.model},
                       {"backend", p.backend},
                       {"device", p.device},
                       {"devices", p.devices},
                       {"batch", p.batch},
                       {"host_threads", p.host_threads},
                       {"layers", layers},
                       {"d2h", link_json(p.d2h)},
                       {"h2d", link_json(p.h2d)},
                       {"p2p", link_json(p.p2p)},
                       {"sync_us", p.sync_us},
                       {"host_sum", sums},
                       {"update_gbps", p.update_gbps},
                       {"device_sum_gbps", p.device_sum_gbps},
                       {"host_memory_gbps", p.host_memory_gbps}};
  if (p.overlap_us_per_mb > 0) root["overlap_us_per_mb"] = p.overlap_us_per_mb;
  if (p.shared_cores > 0) root["shared_cores"] = p.shared_cores;
  if (p.contention_factor != 1) root["contention_factor"] = p.contention_factor;
  if (p.exchange_stretch != 1) root["exchange_stretch"] = p.exchange_stretch;
  if (p.rebuild_bf16_speedup != 1) root["rebuild_bf16_speedup"] = p.rebuild_bf16_speedup;
  if (p.precision != "fp32") root["precision"] = p.precision;
  if (p.network)
    root["network"] = {{"gbit_per_s", p.network->gbps}, {"latency_us", p.network->latency_us}};
  if (p.loader)
    root["loader"] = {{"images_per_s_per_thread", p.loader->images_per_s_per_thread},
                      {"threads", p.loader->threads},
                      {"data", p.loader->data}};
  write_file_atomically(path, root.dump(2) + "\n");
}

}  // namespace cgdp
