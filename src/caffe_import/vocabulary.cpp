// The vocabulary tables: layer types cgdp builds, Caffe's types it refuses (with what to use
// instead), and the fields of each message it honours, with the values it does not.
#include "cgdp/caffe_import/vocabulary.hpp"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "cgdp/core/excerpt.hpp"
#include "cgdp/layers/registry.hpp"

namespace cgdp {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The *_param messages each layer type reads. Types cgdp builds as layers come from the registry;
// this table must name them all (a test holds it to the registry).
const std::map<std::string, std::string>& params_of_type() {
  static const std::map<std::string, std::string> table = {
      {"AbsVal", ""},
      {"Accuracy", "accuracy_param"},
      {"ArgMax", "argmax_param"},
      {"BatchNorm", "batch_norm_param"},
      {"Bias", "bias_param"},
      {"BNLL", ""},
      {"Concat", "concat_param"},
      {"ContrastiveLoss", "contrastive_loss_param"},
      {"Convolution", "convolution_param"},
      {"Crop", "crop_param"},
      {"Deconvolution", "convolution_param"},
      {"Data", "data_param transform_param"},
      {"Dropout", "dropout_param"},
      {"DummyData", "dummy_data_param"},
      {"Eltwise", "eltwise_param"},
      {"ELU", "elu_param"},
      {"EuclideanLoss", ""},
      {"Exp", "exp_param"},
      {"Flatten", "flatten_param"},
      {"HingeLoss", "hinge_loss_param"},
      {"HDF5Data", "hdf5_data_param"},
      {"ImageData", "image_data_param transform_param"},
      {"InnerProduct", "inner_product_param"},
      {"Input", "input_param"},
      {"Log", "log_param"},
      {"LRN", "lrn_param"},
      {"MVN", "mvn_param"},
      {"Pooling", "pooling_param"},
      {"Power", "power_param"},
      {"PReLU", "prelu_param"},
      {"ReLU", "relu_param"},
      {"Reshape", "reshape_param"},
      {"Scale", "scale_param"},
      {"Sigmoid", "sigmoid_param"},
      {"SigmoidCrossEntropyLoss", "loss_param"},
      {"Silence", ""},
      {"Slice", "slice_param"},
      {"Softmax", "softmax_param"},
      {"SoftmaxWithLoss", "softmax_param loss_param"},
      {"Split", ""},
      {"TanH", "tanh_param"},
      {"Threshold", "threshold_param"},
  };
  return table;
}

// Caffe's layer types that cgdp does not build, and what to do instead.
const std::map<std::string, std::string>& refused_types() {
  static const std::string later = "cgdp does not implement it yet";
  static const std::map<std::string, std::string> table = {
      {"BatchReindex", later},
      {"Clip", later},
      {"Embed", later},
      {"Filter", later},
      {"HDF5Output", "cgdp writes no HDF5 outputs: remove the layer (cgdp export and --save write "
                     "parameters; --metrics writes losses and accuracies)"},
      {"Im2col", "cgdp has no separate im2col layer: use a Convolution"},
      {"InfogainLoss", later},
      {"LSTM", "cgdp trains feed-forward nets only (no recurrent layers)"},
      {"LSTMUnit", "cgdp trains feed-forward nets only (no recurrent layers)"},
      {"MemoryData", "cgdp feeds nets from --data: use an Input layer of the same shape"},
      {"MultinomialLogisticLoss", later},
      {"Parameter", later},
      {"Python", "cgdp runs no Python layers: write the layer in C++ (src/layers/) or remove it"},
      {"Reduction", later},
      {"RNN", "cgdp trains feed-forward nets only (no recurrent layers)"},
      {"SPP", later},
      {"Swish", later},
      {"Tile", later},
      {"WindowData", "cgdp reads no detection windows: crop the windows to image files and read "
                     "them with ImageData"},
  };
  return table;
}

// Fields cgdp honours, per message. A field set in a file and not listed here is a problem.
const std::map<std::string, std::set<std::string>>& honoured_fields() {
  static const std::map<std::string, std::set<std::string>> table = [] {
    const std::map<std::string, std::string> lists = {
        {"NetParameter", "name layer state force_backward debug_info"},
        {"NetState", "phase level stage"},
        {"NetStateRule", "phase min_level max_level stage not_stage"},
        {"LayerParameter",
         "name type bottom top loss_weight param propagate_down include exclude source_line"},
        {"ParamSpec", "name lr_mult decay_mult share_mode"},
        {"BlobShape", "dim"},
        {"FillerParameter", "type value min max mean std variance_norm sparse"},
        {"AccuracyParameter", "top_k axis ignore_label"},
        {"BatchNormParameter", "use_global_stats moving_average_fraction eps"},
        {"ConcatParameter", "axis"},
        {"ConvolutionParameter",
         "num_output bias_term pad kernel_size stride dilation pad_h pad_w kernel_h kernel_w "
         "stride_h stride_w group weight_filler bias_filler engine axis force_nd_im2col"},
        {"DataParameter", "source batch_size backend prefetch"},
        {"HDF5DataParameter", "source batch_size shuffle"},
        {"DropoutParameter", "dropout_ratio"},
        {"DummyDataParameter", "data_filler shape num channels height width"},
        {"EltwiseParameter", "operation coeff stable_prod_grad"},
        {"ImageDataParameter",
         "source batch_size shuffle new_height new_width is_color root_folder"},
        {"InnerProductParameter", "num_output bias_term weight_filler bias_filler axis transpose"},
        {"InputParameter", "shape"},
        {"LossParameter", "ignore_label normalization normalize"},
        {"LRNParameter", "local_size alpha beta norm_region k engine"},
        {"PoolingParameter",
         "pool pad pad_h pad_w kernel_size kernel_h kernel_w stride stride_h stride_w engine "
         "global_pooling round_mode"},
        {"ReLUParameter", "negative_slope engine"},
        {"ScaleParameter", "axis num_axes filler bias_term bias_filler"},
        {"SoftmaxParameter", "engine axis"},
        {"SigmoidParameter", "engine"},
        {"TanHParameter", "engine"},
        {"PowerParameter", "power scale shift"},
        {"ExpParameter", "base scale shift"},
        {"LogParameter", "base scale shift"},
        {"ELUParameter", "alpha"},
        {"ThresholdParameter", "threshold"},
        {"FlattenParameter", "axis end_axis"},
        {"ReshapeParameter", "shape axis num_axes"},
        {"SliceParameter", "axis slice_point"},
        {"ContrastiveLossParameter", "margin legacy_version"},
        {"HingeLossParameter", "norm"},
        {"BiasParameter", "axis num_axes filler"},
        {"PReLUParameter", "filler channel_shared"},
        {"ArgMaxParameter", "out_max_val top_k axis"},
        {"CropParameter", "axis offset"},
        {"MVNParameter", "normalize_variance across_channels eps"},
        {"TransformationParameter",
         "scale mirror crop_size mean_file mean_value force_color force_gray"},
        {"SolverParameter",
         "net train_net test_net test_iter test_interval test_compute_loss test_initialization "
         "base_lr "
         "display average_loss max_iter iter_size lr_policy gamma power momentum weight_decay "
         "regularization_type stepsize stepvalue snapshot snapshot_prefix snapshot_format "
         "snapshot_diff snapshot_after_train solver_mode device_id random_seed type solver_type "
         "train_state test_state "
         "debug_info layer_wise_reduce delta momentum2 rms_decay clip_gradients weights"},
    };
    std::map<std::string, std::set<std::string>> out;
    for (const auto& [message, fields] : lists) {
      std::istringstream words(fields);
      for (std::string w; words >> w;) out[message].insert(w);
    }
    return out;
  }();
  return table;
}

// What to say about a field cgdp does not honour, where there is more to say than "not
// implemented".
const std::map<std::string, std::string>& refused_field_advice() {
  static const std::map<std::string, std::string> table = {
      {"LayerParameter.blobs", "weights inside a model file: load them with --weights FILE"},
      {"LayerParameter.phase", "cgdp sets each net's phase itself: use include { phase: ... }"},
      {"DataParameter.rand_skip", "cgdp draws its own order from --seed: remove rand_skip"},
      {"DataParameter.force_encoded_color", "give transform_param { force_color: true } instead"},
      {"ImageDataParameter.rand_skip", "cgdp draws its own order from --seed: remove rand_skip"},
      {"SolverParameter.net_param", "write the net to its own file and name it with net: \"file\""},
      {"SolverParameter.train_net_param",
       "write the net to its own file and name it with net: \"file\""},
      {"SolverParameter.test_net_param",
       "write the net to its own file and name it with net: \"file\""},
  };
  return table;
}

using ValueCheck = std::string (*)(const Message& owner);

template <typename M>
const M& as(const Message& m) {
  return static_cast<const M&>(m);
}

// A uniform filler draws from [min, max]: one the other way round has no values to draw.
std::string uniform_range(const Message& m) {
  const auto& f = as<proto::FillerParameter>(m);
  return f.type() == "uniform" && f.min() > f.max()
             ? cat("uniform filler from min ", f.min(), " to max ", f.max(), ": min is above max")
             : "";
}

// Fields cgdp honours at some values only: the complaint for the value set, or "".
const std::map<std::string, ValueCheck>& value_checks() {
  static const std::map<std::string, ValueCheck> table = {
      {"NetParameter.debug_info",
       [](const Message& m) -> std::string {
         return as<proto::NetParameter>(m).debug_info()
                    ? "cgdp prints no per-blob debug lines: use --timeline or --metrics" : "";
       }},
      {"ConvolutionParameter.axis",
       [](const Message& m) -> std::string {
         return as<proto::ConvolutionParameter>(m).axis() != 1 ? "cgdp convolves over axis 1 only" : "";
       }},
      {"FillerParameter.type",
       [](const Message& m) -> std::string {
         static const std::set<std::string> known = {"constant", "gaussian", "uniform", "xavier", "msra",
                                                     "bilinear", "positive_unitball"};
         const std::string& t = as<proto::FillerParameter>(m).type();
         return known.count(t) ? "" : cat("filler '", t, "' is not implemented (cgdp has constant, "
                                          "gaussian, uniform, xavier, msra, bilinear and positive_unitball)");
       }},
      {"FillerParameter.min", uniform_range},
      {"FillerParameter.max",  // said once, at min, when both are set
       [](const Message& m) {
         return as<proto::FillerParameter>(m).has_min() ? "" : uniform_range(m);
       }},
      {"SolverParameter.regularization_type",
       [](const Message& m) -> std::string {
         return as<proto::SolverParameter>(m).regularization_type() == "L2"
                    ? "" : "cgdp regularises with L2 only (weight_decay): give L2 or remove the field";
       }},
      {"SolverParameter.snapshot_format",
       [](const Message& m) -> std::string {
         return as<proto::SolverParameter>(m).snapshot_format() == proto::SolverParameter::HDF5
                    ? "cgdp writes no HDF5 snapshots: remove the field (checkpoints are cgdp's .ckpt)" : "";
       }},
      {"SolverParameter.snapshot_diff",
       [](const Message& m) -> std::string {
         return as<proto::SolverParameter>(m).snapshot_diff() ? "cgdp's checkpoints hold no gradients" : "";
       }},
      {"SolverParameter.debug_info",
       [](const Message& m) -> std::string {
         return as<proto::SolverParameter>(m).debug_info()
                    ? "cgdp prints no per-blob debug lines: use --timeline or --metrics" : "";
       }},
      {"SolverParameter.device_id",
       [](const Message& m) -> std::string {
         return as<proto::SolverParameter>(m).device_id() != 0
                    ? "cgdp uses GPUs 0..N-1 (--devices N): pick them with CUDA_VISIBLE_DEVICES" : "";
       }},
      {"SolverParameter.type",
       [](const Message& m) -> std::string {
         static const std::set<std::string> known = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};
         const std::string& t = as<proto::SolverParameter>(m).type();
         return known.count(t) ? "" : cat("unknown solver type \"", t, "\" (Caffe's are SGD, Nesterov, AdaGrad, "
                                          "RMSProp, AdaDelta and Adam)");
       }},
      {"DataParameter.backend",
       [](const Message& m) -> std::string {
         return as<proto::DataParameter>(m).backend() == proto::DataParameter::LEVELDB
                    ? "LevelDB is not supported: convert the data to LMDB (cgdp convert, or Caffe's "
                      "convert_imageset -backend lmdb) and give backend: LMDB"
                    : "";
       }},
  };
  return table;
}

// A NaN or infinite number in any float field (an lr_mult, a filler's std, a loss_weight): no
// setting means it, and training on it reported "test accuracy 1" with NaN weights.
std::string non_finite(const Message& m, const FieldDescriptor* f) {
  if (f->cpp_type() != FieldDescriptor::CPPTYPE_FLOAT &&
      f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE)
    return "";
  const auto* r = m.GetReflection();
  const bool is_float = f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT;
  const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
  for (int i = 0; i < n; ++i) {
    const double v = f->is_repeated()
                         ? (is_float ? r->GetRepeatedFloat(m, f, i) : r->GetRepeatedDouble(m, f, i))
                         : (is_float ? r->GetFloat(m, f) : r->GetDouble(m, f));
    if (!std::isfinite(v)) return cat("expected a finite number, got ", v);
  }
  return "";
}

struct Walk {
  FileProblems& problems;
  std::string context;  // "layer 'conv1' (Convolution)"
  int fallback_line;

  int line_of(const TextLocations* where, const FieldDescriptor* field) const {
    if (!where) return fallback_line;
    const int line = where->GetLocation(field, field->is_repeated() ? 0 : -1).line;
    return line >= 0 ? line + 1 : fallback_line;
  }

  void complain(int line, const std::string& path, const std::string& what) {
    problems.add(line, context.empty() ? cat(path, ": ", what) : cat(context, ": ", path, ": ", what));
  }

  // Checks every field set in `m` (and in the messages under it) against the tables.
  void message(const Message& m, const TextLocations* where, const std::string& path) {
    const std::string type = caffe_message_name(*m.GetDescriptor());
    const auto& honoured = honoured_fields();
    const auto listed = honoured.find(type);
    std::vector<const FieldDescriptor*> fields;
    m.GetReflection()->ListFields(m, &fields);
    for (const FieldDescriptor* f : fields) {
      const std::string key = cat(type, ".", f->name());
      const std::string here = path.empty() ? f->name() : cat(path, ".", f->name());
      const int line = line_of(where, f);
      // A layer's own *_param messages are all that check_layer leaves of them.
      const bool own_param = type == "LayerParameter" && f->name().ends_with("_param");
      if (!own_param && (listed == honoured.end() || !listed->second.count(f->name()))) {
        const auto advice = refused_field_advice().find(key);
        complain(line, here, advice != refused_field_advice().end()
                                 ? advice->second
                                 : cat("cgdp does not implement this field of Caffe's ", type));
        continue;
      }
      if (auto check = value_checks().find(key); check != value_checks().end())
        if (std::string why = check->second(m); !why.empty()) complain(line, here, why);
      if (std::string why = non_finite(m, f); !why.empty()) complain(line, here, why);
      if (f->type() != FieldDescriptor::TYPE_MESSAGE) continue;
      const int n = f->is_repeated() ? m.GetReflection()->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        const Message& sub = f->is_repeated() ? m.GetReflection()->GetRepeatedMessage(m, f, i)
                                              : m.GetReflection()->GetMessage(m, f);
        const TextLocations* nested = where ? where->GetTreeForNested(f, f->is_repeated() ? i : -1) : nullptr;
        message(sub, nested, here);
      }
    }
  }
};

std::string known_types_list() {
  std::string out;
  for (const auto& [type, _] : params_of_type()) out += (out.empty() ? "" : ", ") + type;
  return out;
}

// A layer: its type, the *_param messages it may carry, then every field under it.
void check_layer(const proto::LayerParameter& layer, const TextLocations* where, FileProblems& problems) {
  const int line = layer.source_line();
  const std::string who = cat("layer '", excerpt(layer.name()), "'");
  if (layer.type().empty()) {
    problems.add(line, cat(who, " has no type"));
    return;
  }
  if (auto refused = refused_types().find(layer.type()); refused != refused_types().end()) {
    problems.add(line, cat(who, ": Caffe's ", layer.type(), " layer: ", refused->second));
    return;
  }
  const auto reads = params_of_type().find(layer.type());
  if (reads == params_of_type().end()) {
    problems.add(line, cat(who, ": unknown type '", excerpt(layer.type()),
                           "' (known: ", known_types_list(), ")"));
    return;
  }
  if (layer.include_size() > 0 && layer.exclude_size() > 0)
    problems.add(line, cat(who, " gives include and exclude rules; give one kind (as Caffe)"));
  const std::string own = cat(" ", reads->second, " ");
  Walk walk{problems, cat(who, " (", layer.type(), ")"), line};
  std::vector<const FieldDescriptor*> fields;
  layer.GetReflection()->ListFields(layer, &fields);
  for (const FieldDescriptor* f : fields) {
    if (!f->name().ends_with("_param") || own.find(cat(" ", f->name(), " ")) != std::string::npos) continue;
    walk.complain(walk.line_of(where, f), f->name(),
                  cat(layer.type(), " does not read it", reads->second.empty() ? "" : cat(" (it reads ", reads->second, ")")));
  }
  // The *_param messages of other types were named above; check the rest field by field.
  proto::LayerParameter own_fields = layer;
  for (const FieldDescriptor* f : fields)
    if (f->name().ends_with("_param") && own.find(cat(" ", f->name(), " ")) == std::string::npos)
      own_fields.GetReflection()->ClearField(&own_fields, f);
  walk.message(own_fields, where, "");
}

}  // namespace

void check_net_vocabulary(const proto::NetParameter& net, const TextLocations* net_locations,
                          const std::vector<const TextLocations*>& layer_locations,
                          FileProblems& problems) {
  proto::NetParameter header = net;
  header.clear_layer();
  Walk{problems, "", 0}.message(header, net_locations, "");
  for (int i = 0; i < net.layer_size(); ++i)
    check_layer(net.layer(i), i < static_cast<int>(layer_locations.size()) ? layer_locations[i] : nullptr,
                problems);
}

void check_solver_vocabulary(const proto::SolverParameter& solver, const TextLocations* locations,
                             FileProblems& problems) {
  Walk{problems, "", 0}.message(solver, locations, "");
}

}  // namespace cgdp
