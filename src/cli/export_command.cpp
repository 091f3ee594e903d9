// `cgdp export`: a net's trained weights written for another tool, as a .caffemodel Caffe loads
// (or cgdp's safetensors), from any file --weights reads.
#include <cstdio>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/train/data_feeds.hpp"
#include "cli/commands.hpp"

namespace cgdp::cli {

namespace {

struct ExportOptions {
  std::string model = "fashion_cnn";
  std::string data;  // for a model with data layers: a source of its input's shape
  std::vector<std::string> weights;
  std::string weights_map;
  std::string to;  // caffemodel or safetensors; empty: from --out's extension
  std::string out;
};

int run_export(const ExportOptions& o) {
  std::string format = o.to;
  if (format.empty()) format = o.out.ends_with(".safetensors") ? "safetensors" : "caffemodel";
  if (format != "caffemodel" && format != "safetensors")
    throw UsageError(cat("--to: expected caffemodel or safetensors, got '", format, "'"));
  const std::string path = find_model_file(o.model);
  proto::NetParameter model = load_model(path);
  TrainConfig shape;
  shape.data = o.data;
  (void)plan_data_feeds(model, path, shape);
  Net<float> net(model, Phase::Train, default_cpu_device(), 1, 1, path);
  const auto names = o.weights_map.empty() ? std::map<std::string, std::string>{} : read_weights_map(o.weights_map);
  std::vector<StoredWeights> files;
  for (const std::string& w : o.weights) files.push_back(read_weights_file(w, names));
  const WeightsReport report = load_weights(net, files, /*allow_mismatch=*/false);
  if (!report.missing.empty())
    throw UsageError(cat("the weights leave ", report.missing.size(), " layer(s) of ", path, " without values (",
                         report.missing.front(), report.missing.size() > 1 ? ", ..." : "",
                         "): exporting would write their random initial values"));
  if (format == "caffemodel") write_caffemodel(net, o.out);
  else write_parameters_safetensors(net, o.out, {{"format", "cgdp-parameters"}, {"model", net.name()}});
  std::printf("cgdp: wrote %s (%s): %s\n", o.out.c_str(), format.c_str(), report.summary().c_str());
  return 0;
}

}  // namespace

Runner add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a net's trained weights as a .caffemodel (Caffe's -weights reads it) or safetensors");
  cmd->add_option("-m,--model", o->model, "Model file, or a name from models/")->capture_default_str();
  cmd->add_option("--weights", o->weights,
                  "The weights: .caffemodel, cgdp's --save or checkpoint, or safetensors with --weights-map")
      ->required()->delimiter(',')->check(CLI::ExistingFile);
  cmd->add_option("--weights-map", o->weights_map, "Lines 'tensor_name layer/index' for another framework's names")
      ->check(CLI::ExistingFile);
  cmd->add_option("--to", o->to, "caffemodel or safetensors (default: from --out's extension)");
  cmd->add_option("-o,--out", o->out, "The file to write (replaced atomically)")->required();
  cmd->add_option("-d,--data", o->data, "A model with data layers: the source of its input's shape "
                                        "(synthetic:C,H,W,K gives a shape without data)");
  return [o] { return run_export(*o); };
}

}  // namespace cgdp::cli
