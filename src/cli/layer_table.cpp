// The per-layer time table of `cgdp time` and `cgdp profile`.
#include "cli/layer_table.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp::cli {

void print_layer_table(std::span<const LayerCost* const> layers, std::span<const LayerCost> all,
                       const char* heading, FILE* out, std::span<const std::string> runs) {
  std::fprintf(out, "  %-28s %-16s %12s %12s %11s%s\n", heading, "type", "forward ms",
               "backward ms", "params MiB", runs.empty() ? "" : "  runs");
  for (size_t k = 0; k < layers.size(); ++k) {
    const LayerCost* l = layers[k];
    const std::string note = k < runs.size() && !runs[k].empty() ? "  " + runs[k] : "";
    std::fprintf(out, "  %-28s %-16s %12.3f %12.3f %11.3f%s\n", l->name.c_str(), l->type.c_str(),
                 l->forward_us / 1e3, l->backward_us / 1e3, l->param_bytes / 1048576.0,
                 note.c_str());
  }
  double forward = 0, backward = 0;
  for (const LayerCost& l : all) forward += l.forward_us, backward += l.backward_us;
  std::fprintf(out, "  %-28s %-16s %12.3f %12.3f\n", cat("all ", all.size(), " layers").c_str(), "",
               forward / 1e3, backward / 1e3);
  std::fprintf(out, "  forward-backward: %.3f ms\n", (forward + backward) / 1e3);
}

}  // namespace cgdp::cli
