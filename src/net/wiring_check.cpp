// Layer names and blob producers of one phase's net, checked before it is built.
#include "cgdp/net/wiring_check.hpp"

#include <map>

#include "cgdp/core/error.hpp"
#include "cgdp/net/model_file.hpp"

namespace cgdp {

namespace {

// " (line N)" for a layer read from a model file, else nothing.
std::string line_of(const proto::LayerParameter& layer) {
  return layer.has_source_line() ? cat(" (line ", layer.source_line(), ")") : std::string();
}

// Caffe's rule: top j is written in place when it names the layer's bottom j.
bool in_place(const proto::LayerParameter& layer, int j) {
  return j < layer.bottom_size() && layer.bottom(j) == layer.top(j);
}

}  // namespace

void check_wiring(const proto::NetParameter& param, const std::string& source) {
  std::map<std::string, const proto::LayerParameter*> producer_of;
  for (const auto& layer : param.layer()) {
    const std::string where = cat(located(source, layer), ": layer '", layer.name(), "'");
    // Parameters are saved as "<layer>/<index>" and state as "<layer>/state/<index>".
    if (layer.name().empty() || layer.name().ends_with("/state"))
      throw ModelError(cat(located(source, layer), ": layer '", layer.name(), "' (", layer.type(),
                           "): each layer needs a name, not empty and not ending in ",
                           "'/state', since its parameters are saved and read back under it"));
    for (int j = 0; j < layer.top_size(); ++j) {
      if (in_place(layer, j)) continue;
      auto [it, fresh] = producer_of.emplace(layer.top(j), &layer);
      if (fresh) continue;
      if (it->second == &layer)
        throw ModelError(cat(where, ": lists top '", layer.top(j), "' twice"));
      throw ModelError(cat(where, ": top '", layer.top(j), "' is already produced by layer '",
                           it->second->name(), "'", line_of(*it->second),
                           "; a blob has one producer, or is rewritten in place (a top named as "
                           "the layer's bottom in the same position)"));
    }
  }
}

}  // namespace cgdp
