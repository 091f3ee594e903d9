// Profile against model: the layer list and the parameter sizes must be those of the train net.
#include "cgdp/cost/profile_match.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {

void check_profile_matches(const Profile& profile, std::span<const std::string> layer_names,
                           std::span<const ParamLayer> params) {
  const auto mismatch = [&](const std::string& what) {
    return DataError(cat(profile.source, ": does not match the model: ", what));
  };
  const size_t n = std::min(layer_names.size(), profile.layers.size());
  for (size_t i = 0; i < n; ++i)
    if (profile.layers[i].name != layer_names[i])
      throw mismatch(cat("layers[", i, "].name is '", profile.layers[i].name,
                         "' but the model's layer ", i, " is '", layer_names[i], "'"));
  if (profile.layers.size() != layer_names.size())
    throw mismatch(
        cat("the profile has ", profile.layers.size(), " layers, the model ", layer_names.size()));
  std::vector<int64_t> model_bytes(layer_names.size(), 0);
  for (const ParamLayer& p : params) model_bytes.at(p.layer) = p.count * 4;
  for (size_t i = 0; i < n; ++i)
    if (profile.layers[i].param_bytes != model_bytes[i])
      throw mismatch(cat("layers[", i, "].param_bytes of '", layer_names[i], "' is ",
                         profile.layers[i].param_bytes, " but the model has ", model_bytes[i]));
}

template <typename T>
void check_profile_matches(const Profile& profile, const Net<T>& net) {
  std::vector<std::string> names;
  for (int i = 0; i < net.num_layers(); ++i) names.push_back(net.layer(i).name());
  check_profile_matches(profile, names, param_layers(net));
}

template void check_profile_matches(const Profile&, const Net<float>&);
template void check_profile_matches(const Profile&, const Net<double>&);

}  // namespace cgdp
