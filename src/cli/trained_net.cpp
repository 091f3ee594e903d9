// The model and weights flags of `cgdp export` and `cgdp forward`.
#include "cli/trained_net.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/train/data_feeds.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

void add_trained_net_flags(CLI::App* cmd, TrainedNetFlags& f) {
  cmd->add_option("-m,--model", f.model, "Model file, or a name from models/")->capture_default_str();
  cmd->add_option("--weights", f.weights,
                  "The weights: .caffemodel, cgdp's --save or checkpoint, PyTorch's state_dict as safetensors "
                  "(<layer>.weight/.bias), or other safetensors with --weights-map")
      ->required()->delimiter(',')->check(CLI::ExistingFile);
  cmd->add_option("--weights-map", f.weights_map, "Lines 'tensor_name layer/index' for another framework's names")
      ->check(CLI::ExistingFile);
  cmd->add_option("-d,--data", f.data,
                  "A model with data layers: the source of its input's shape "
                  "(synthetic:C,H,W,K gives a shape without data)")
      ->check(kNotEmpty);
}

proto::NetParameter load_trained_model(const TrainedNetFlags& f, std::string& path) {
  path = find_model_file(f.model);
  proto::NetParameter model = load_model(path);
  TrainConfig shape;
  shape.data = f.data;
  require_test_net(plan_data_feeds(model, path, shape), path);
  return model;
}

WeightsReport fill_with_weights(Net<float>& net, const TrainedNetFlags& f, const std::string& path,
                                const std::string& outcome) {
  const auto names = f.weights_map.empty() ? std::map<std::string, std::string>{} : read_weights_map(f.weights_map);
  std::vector<StoredWeights> files;
  for (const std::string& w : f.weights) files.push_back(read_weights_file(w, names));
  const WeightsReport report = load_weights(net, files, /*allow_mismatch=*/false);
  if (!report.missing.empty())
    throw UsageError(cat("the weights leave ", report.missing.size(), " layer(s) of ", path, " without values (",
                         report.missing.front(), report.missing.size() > 1 ? ", ..." : "", "): ", outcome,
                         " would come from their random initial values"));
  return report;
}

}  // namespace cgdp::cli
