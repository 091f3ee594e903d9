// `cgdp forward`: one TEST-phase forward pass of a model with trained weights over inputs from a
// safetensors file, writing the blobs asked for (by default the net's outputs) to another. What
// Caffe's `extract_features` does, and how an import from another framework is checked: the same
// weights and inputs must give the same outputs there and here.
#include <algorithm>
#include <cstdio>
#include <list>
#include <span>
#include <vector>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/io/safetensors.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "cli/commands.hpp"
#include "cli/trained_net.hpp"

namespace cgdp::cli {

namespace {

struct ForwardOptions {
  TrainedNetFlags net;
  std::string input, out;
  std::vector<std::string> blobs;  // empty: the net's outputs
};

// The net's outputs: tops that no later layer reads (in-place layers write their bottom's blob).
std::vector<std::string> output_blobs(const Net<float>& net) {
  std::vector<std::string> names;
  for (int i = 0; i < net.num_layers(); ++i)
    for (size_t t = 0; t < net.tops(i).size(); ++t) {
      bool read_later = false;
      for (int j = i + 1; j < net.num_layers() && !read_later; ++j)
        for (const Blob<float>* b : net.bottoms(j)) read_later |= b == net.tops(i)[t];
      const std::string& name = net.top_names(i)[t];
      if (!read_later && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  return names;
}

// The batch of `inputs`: the first axis of each tensor named as one of the Input's tops, which
// must all agree and otherwise match the model's declared shapes.
int64_t input_batch(const SafetensorsFile& inputs, Net<float>& net, const std::vector<std::string>& tops) {
  int64_t batch = -1;
  for (size_t t = 0; t < tops.size(); ++t) {
    if (!inputs.tensors().contains(tops[t]))
      throw UsageError(cat(inputs.source(), ": no tensor '", tops[t], "' (the net's Input reads ", tops.size(),
                           " top(s); give one tensor named as each)"));
    const Shape& given = inputs.entry(tops[t]).shape;
    Shape declared = net.input_layer().declared_shape(static_cast<int>(t));
    if (given.empty() || declared.empty() || given.size() != declared.size() ||
        !std::equal(given.begin() + 1, given.end(), declared.begin() + 1))
      throw UsageError(cat(inputs.source(), ": tensor '", tops[t], "' is ", shape_string(given), "; the model's Input "
                           "declares ", shape_string(declared), " (any first dimension)"));
    if (batch >= 0 && given[0] != batch)
      throw UsageError(cat(inputs.source(), ": tensor '", tops[t], "' holds ", given[0], " samples where '", tops[0],
                           "' holds ", batch));
    batch = given[0];
  }
  if (batch <= 0) throw UsageError(cat(inputs.source(), ": the inputs hold no samples"));
  return batch;
}

int run_forward(const ForwardOptions& o) {
  std::string path;
  const proto::NetParameter model = load_trained_model(o.net, path);
  const SafetensorsFile inputs = load_safetensors(o.input);
  Net<float> net(model, Phase::Test, default_cpu_device(), 0, 1, path);
  const std::vector<std::string> tops = net.top_names(0);  // the Input layer comes first
  net.set_batch_size(input_batch(inputs, net, tops));
  const WeightsReport report = fill_with_weights(net, o.net, path, "the outputs");

  for (size_t t = 0; t < tops.size(); ++t) {
    const std::vector<float> values = inputs.values<float>(tops[t]);
    std::copy(values.begin(), values.end(), net.blob(tops[t])->mutable_data_span().begin());
  }
  net.forward(RunContext{.phase = Phase::Test});

  const std::vector<std::string> wanted = o.blobs.empty() ? output_blobs(net) : o.blobs;
  TensorRefs refs;
  std::list<std::vector<float>> nchw_copies;  // a blob kept in a channel block is written as NCHW
  for (const std::string& name : wanted) {
    const Blob<float>* blob = net.blob(name);
    if (blob == nullptr) throw UsageError(cat("--blobs: the TEST net of ", path, " has no blob '", name, "'"));
    std::span<const float> values = blob->data_span();
    if (blob->channel_block() > 1) {
      std::vector<float>& copy = nchw_copies.emplace_back(values.size());
      reorder_channel_blocks(values.data(), blob->channel_block(), copy.data(), 1, blob->shape());
      values = copy;
    }
    refs.emplace(name, TensorRef::of(values, blob->shape()));
  }
  save_safetensors(o.out, refs, {{"format", "cgdp-forward"}, {"model", path}});
  std::printf("cgdp: %s: %lld samples forward; wrote", report.summary().c_str(), static_cast<long long>(net.batch_size()));
  for (const auto& [name, ref] : refs) std::printf(" %s %s", name.c_str(), shape_string(ref.shape).c_str());
  std::printf(" to %s\n", o.out.c_str());
  return 0;
}

}  // namespace

Runner add_forward_command(CLI::App& app) {
  auto o = std::make_shared<ForwardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "forward", "Run trained weights forward (TEST phase, on the CPU) over inputs from a safetensors file");
  add_trained_net_flags(cmd, o->net);
  cmd->add_option("-i,--input", o->input,
                  "safetensors with a tensor per Input top (N x the model's input shape; F32 or F64)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", o->out, "safetensors to write the blobs to (replaced atomically)")->required();
  cmd->add_option("--blobs", o->blobs, "Blobs to write, by top name (default: the net's outputs)")->delimiter(',');
  return [o] { return run_forward(*o); };
}

}  // namespace cgdp::cli
