// `cgdp export`: a net's trained weights written for another tool, as a .caffemodel Caffe loads
// (or cgdp's safetensors), from any file --weights reads.
#include <cstdio>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cli/commands.hpp"
#include "cli/trained_net.hpp"

namespace cgdp::cli {

namespace {

struct ExportOptions {
  TrainedNetFlags net;
  std::string to;  // caffemodel or safetensors; empty: from --out's extension
  std::string out;
};

int run_export(const ExportOptions& o) {
  std::string format = o.to;
  if (format.empty()) format = o.out.ends_with(".safetensors") ? "safetensors" : "caffemodel";
  if (format != "caffemodel" && format != "safetensors")
    throw UsageError(cat("--to: expected caffemodel or safetensors, got '", format, "'"));
  std::string path;
  const proto::NetParameter model = load_trained_model(o.net, path);
  Net<float> net(model, Phase::Train, default_cpu_device(), 1, 1, path);
  const WeightsReport report = fill_with_weights(net, o.net, path, "the exported values");
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
  add_trained_net_flags(cmd, o->net);
  cmd->add_option("--to", o->to, "caffemodel or safetensors (default: from --out's extension)");
  cmd->add_option("-o,--out", o->out, "The file to write (replaced atomically)")->required();
  return [o] { return run_export(*o); };
}

}  // namespace cgdp::cli
