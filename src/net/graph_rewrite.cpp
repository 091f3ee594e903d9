// Phase filtering and Split insertion, on the protobuf description (as Caffe's insert_splits).
#include "cgdp/net/graph_rewrite.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cgdp/net/model_file.hpp"

namespace cgdp {

namespace {

bool has_stage(const proto::NetState& state, const std::string& stage) {
  return std::find(state.stage().begin(), state.stage().end(), stage) != state.stage().end();
}

bool rule_matches(const proto::NetStateRule& rule, Phase phase, const proto::NetState& state) {
  if (rule.has_phase() && (rule.phase() == proto::TEST) != (phase == Phase::Test)) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const auto& stage : rule.stage())
    if (!has_stage(state, stage)) return false;
  for (const auto& stage : rule.not_stage())
    if (has_stage(state, stage)) return false;
  return true;
}

using TopRef = std::pair<int, int>;  // (layer, top index)

std::string split_blob_name(const std::string& layer, const std::string& blob, int top, int k) {
  return cat(blob, "_", layer, "_", top, "_split_", k);
}

}  // namespace

bool layer_in_phase(const proto::LayerParameter& layer, Phase phase, const proto::NetState& state) {
  if (layer.include_size() > 0) {  // the vocabulary check refuses include and exclude together
    for (const auto& rule : layer.include())
      if (rule_matches(rule, phase, state)) return true;
    return false;
  }
  for (const auto& rule : layer.exclude())
    if (rule_matches(rule, phase, state)) return false;
  return true;
}

proto::NetState merged_state(const proto::NetParameter& model, const proto::NetState& extra) {
  proto::NetState state = model.state();
  state.MergeFrom(extra);  // as Caffe's Net::Init: stages appended, a set level replaces
  return state;
}

proto::NetParameter resolve_states(const proto::NetParameter& model, const proto::NetState& train,
                                   const proto::NetState& test) {
  const proto::NetState train_state = merged_state(model, train);
  const proto::NetState test_state = merged_state(model, test);
  proto::NetParameter out = model;
  out.clear_layer();
  out.clear_state();
  for (const auto& layer : model.layer()) {
    const bool in_train = layer_in_phase(layer, Phase::Train, train_state);
    const bool in_test = layer_in_phase(layer, Phase::Test, test_state);
    if (!in_train && !in_test) continue;
    proto::LayerParameter* kept = out.add_layer();
    *kept = layer;
    kept->clear_include();
    kept->clear_exclude();
    if (in_train != in_test) kept->add_include()->set_phase(in_train ? proto::TRAIN : proto::TEST);
  }
  return out;
}

proto::NetParameter filter_phase(const proto::NetParameter& param, Phase phase) {
  proto::NetParameter out = param;
  out.clear_layer();
  for (const auto& layer : param.layer())
    if (layer_in_phase(layer, phase, param.state())) *out.add_layer() = layer;
  return out;
}

proto::NetParameter insert_splits(const proto::NetParameter& param, const std::string& source) {
  std::map<std::string, TopRef> last_top;
  std::map<std::pair<int, int>, TopRef> source_of;  // (layer, bottom) -> producing top
  std::map<TopRef, int> consumers;
  for (int i = 0; i < param.layer_size(); ++i) {
    const auto& layer = param.layer(i);
    for (int j = 0; j < layer.bottom_size(); ++j) {
      auto it = last_top.find(layer.bottom(j));
      if (it == last_top.end())
        throw ModelError(cat(located(source, layer), ": layer '", layer.name(), "': bottom '",
                             layer.bottom(j), "' is not produced by any earlier layer"));
      source_of[{i, j}] = it->second;
      ++consumers[it->second];
    }
    for (int j = 0; j < layer.top_size(); ++j) last_top[layer.top(j)] = {i, j};
  }
  proto::NetParameter out = param;
  out.clear_layer();
  std::map<TopRef, int> next_split;
  for (int i = 0; i < param.layer_size(); ++i) {
    const int index = out.layer_size();
    *out.add_layer() = param.layer(i);
    proto::LayerParameter* layer = out.mutable_layer(index);
    for (int j = 0; j < layer->bottom_size(); ++j) {
      const TopRef src = source_of[{i, j}];
      if (consumers[src] > 1)
        layer->set_bottom(j, split_blob_name(param.layer(src.first).name(), layer->bottom(j),
                                             src.second, next_split[src]++));
    }
    for (int j = 0; j < layer->top_size(); ++j) {
      const int n = consumers[{i, j}];
      if (n <= 1) continue;
      proto::LayerParameter* split = out.add_layer();
      split->set_name(cat(layer->top(j), "_", layer->name(), "_", j, "_split"));
      split->set_type("Split");
      if (layer->has_source_line()) split->set_source_line(layer->source_line());
      split->add_bottom(layer->top(j));
      for (int k = 0; k < n; ++k) split->add_top(split_blob_name(layer->name(), layer->top(j), j, k));
    }
  }
  return out;
}

std::string add_scoring_layers(proto::NetParameter& model, const std::string& source) {
  proto::LayerParameter* input = nullptr;
  for (proto::LayerParameter& layer : *model.mutable_layer()) {
    const std::string& type = layer.type();
    if (type == "Accuracy" || type.ends_with("Loss")) return "";
    if (type != "Input") continue;
    if (input || layer.top_size() != 1) return "";  // labels already, or inputs of its own
    input = &layer;
  }
  if (!input || input->input_param().shape_size() == 0) return "";
  // The output: the one top no later layer reads (in-place layers write over their bottom).
  std::set<std::string> read;
  for (const proto::LayerParameter& layer : model.layer())
    for (const std::string& bottom : layer.bottom()) read.insert(bottom);
  std::vector<std::string> outputs;
  for (const proto::LayerParameter& layer : model.layer())
    for (const std::string& top : layer.top())
      if (!read.count(top) && std::find(outputs.begin(), outputs.end(), top) == outputs.end())
        outputs.push_back(top);
  if (outputs.size() != 1) {
    std::string names;
    for (const std::string& o : outputs) names += (names.empty() ? "" : ", ") + o;
    throw ModelError(cat(source, ": the net reads no labels and has ", outputs.size(), " outputs (",
                         names,
                         "): cgdp test scores one; add its loss and Accuracy layers to the file"));
  }
  const std::string output = outputs[0];
  // A final Softmax's probabilities have the argmax of its input; the loss wants the logits.
  std::string logits = output;
  for (const proto::LayerParameter& layer : model.layer())
    if (layer.type() == "Softmax" && layer.top_size() == 1 && layer.top(0) == output &&
        layer.bottom_size() == 1 && layer.bottom(0) != output)
      logits = layer.bottom(0);
  std::set<std::string> taken = read;  // blob and layer names the added ones must not reuse
  for (const proto::LayerParameter& layer : model.layer()) {
    taken.insert(layer.name());
    for (const std::string& top : layer.top()) taken.insert(top);
  }
  auto fresh = [&](std::string name) {
    while (taken.count(name)) name += "_";
    taken.insert(name);
    return name;
  };
  const std::string label = fresh("label");
  input->add_top(label);
  input->mutable_input_param()->add_shape()->add_dim(input->input_param().shape(0).dim(0));
  auto add = [&](const char* type, const char* base) {
    const std::string name = fresh(base);
    proto::LayerParameter* layer = model.add_layer();
    layer->set_type(type);
    layer->set_name(name);
    layer->add_bottom(logits);
    layer->add_bottom(label);
    layer->add_top(name);
  };
  add("SoftmaxWithLoss", "loss");
  add("Accuracy", "accuracy");
  return cat("the net reads no labels: scored by a SoftmaxWithLoss and an Accuracy on '", logits,
             "'", logits == output ? "" : cat(" (the input of its final Softmax '", output, "')"),
             ", with labels from the data");
}

void use_gemm_convolutions(proto::NetParameter& model) {
  for (proto::LayerParameter& layer : *model.mutable_layer())
    if (layer.type() == "Convolution")
      layer.mutable_convolution_param()->set_engine(proto::ConvolutionParameter::CAFFE);
}

}  // namespace cgdp
