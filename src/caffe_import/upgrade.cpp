// V1 layers, the deploy header and moved fields, upgraded as Caffe's upgrade_proto.cpp does.
#include "cgdp/caffe_import/upgrade.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

namespace cgdp {

namespace {

using V1 = proto::V1LayerParameter;

// Copies every `*_param` message V1 holds into the field of the same name in `layer`.
void copy_param_messages(const V1& old, proto::LayerParameter& layer) {
  const auto* from = old.GetReflection();
  const auto* to = layer.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  from->ListFields(old, &fields);
  for (const auto* field : fields) {
    if (!field->name().ends_with("_param")) continue;
    const auto* target = layer.GetDescriptor()->FindFieldByName(field->name());
    if (target && target->message_type() == field->message_type())
      to->MutableMessage(&layer, target)->CopyFrom(from->GetMessage(old, field));
  }
}

proto::ParamSpec& param_spec(proto::LayerParameter& layer, int i) {
  while (layer.param_size() <= i) layer.add_param();
  return *layer.mutable_param(i);
}

proto::LayerParameter upgraded(const V1& old, FileProblems& problems) {
  const int line = old.source_line();
  proto::LayerParameter layer;
  layer.set_name(old.name());
  if (old.has_source_line()) layer.set_source_line(line);
  if (old.has_layer())
    problems.add(line, cat("layer '", old.name(), "' is in Caffe's V0 format (a `layer` inside "
                           "`layers`): upgrade the file with Caffe's upgrade_net_proto_text first"));
  if (!old.has_type() || old.type() == V1::NONE)
    problems.add(line, cat("layer '", old.name(), "' has no type"));
  else
    layer.set_type(v1_type_name(old.type()));
  layer.mutable_bottom()->CopyFrom(old.bottom());
  layer.mutable_top()->CopyFrom(old.top());
  layer.mutable_include()->CopyFrom(old.include());
  layer.mutable_exclude()->CopyFrom(old.exclude());
  layer.mutable_loss_weight()->CopyFrom(old.loss_weight());
  layer.mutable_blobs()->CopyFrom(old.blobs());
  for (int i = 0; i < old.param_size(); ++i) param_spec(layer, i).set_name(old.param(i));
  for (int i = 0; i < old.blob_share_mode_size(); ++i)
    param_spec(layer, i).set_share_mode(static_cast<proto::ParamSpec::DimCheckMode>(old.blob_share_mode(i)));
  for (int i = 0; i < old.blobs_lr_size(); ++i) param_spec(layer, i).set_lr_mult(old.blobs_lr(i));
  for (int i = 0; i < old.weight_decay_size(); ++i) param_spec(layer, i).set_decay_mult(old.weight_decay(i));
  copy_param_messages(old, layer);
  return layer;
}

// data_param, image_data_param and window_data_param each once held the transformation.
template <typename DataParam>
void move_transformation(DataParam& data, proto::TransformationParameter& transform) {
  if (data.has_scale()) transform.set_scale(data.scale());
  if (data.has_mean_file()) transform.set_mean_file(data.mean_file());
  if (data.has_crop_size()) transform.set_crop_size(data.crop_size());
  if (data.has_mirror()) transform.set_mirror(data.mirror());
  data.clear_scale();
  data.clear_mean_file();
  data.clear_crop_size();
  data.clear_mirror();
}

// concat_dim and slice_dim are the old names of `axis`; Caffe refuses both at once.
template <typename AxisParam>
void rename_axis(AxisParam& p, bool has_old, uint32_t old_value, const char* old_name,
                 const proto::LayerParameter& layer, FileProblems& problems) {
  if (!has_old) return;
  if (p.has_axis())
    problems.add(layer.source_line(), cat("layer '", layer.name(), "' gives both ", old_name,
                                          " and axis; give axis only"));
  else
    p.set_axis(static_cast<int32_t>(old_value));
}

}  // namespace

std::string v1_type_name(V1::LayerType type) {
  switch (type) {
    case V1::NONE: return "";
    case V1::ABSVAL: return "AbsVal";
    case V1::ACCURACY: return "Accuracy";
    case V1::ARGMAX: return "ArgMax";
    case V1::BNLL: return "BNLL";
    case V1::CONCAT: return "Concat";
    case V1::CONTRASTIVE_LOSS: return "ContrastiveLoss";
    case V1::CONVOLUTION: return "Convolution";
    case V1::DATA: return "Data";
    case V1::DECONVOLUTION: return "Deconvolution";
    case V1::DROPOUT: return "Dropout";
    case V1::DUMMY_DATA: return "DummyData";
    case V1::EUCLIDEAN_LOSS: return "EuclideanLoss";
    case V1::ELTWISE: return "Eltwise";
    case V1::EXP: return "Exp";
    case V1::FLATTEN: return "Flatten";
    case V1::HDF5_DATA: return "HDF5Data";
    case V1::HDF5_OUTPUT: return "HDF5Output";
    case V1::HINGE_LOSS: return "HingeLoss";
    case V1::IM2COL: return "Im2col";
    case V1::IMAGE_DATA: return "ImageData";
    case V1::INFOGAIN_LOSS: return "InfogainLoss";
    case V1::INNER_PRODUCT: return "InnerProduct";
    case V1::LRN: return "LRN";
    case V1::MEMORY_DATA: return "MemoryData";
    case V1::MULTINOMIAL_LOGISTIC_LOSS: return "MultinomialLogisticLoss";
    case V1::MVN: return "MVN";
    case V1::POOLING: return "Pooling";
    case V1::POWER: return "Power";
    case V1::RELU: return "ReLU";
    case V1::SIGMOID: return "Sigmoid";
    case V1::SIGMOID_CROSS_ENTROPY_LOSS: return "SigmoidCrossEntropyLoss";
    case V1::SILENCE: return "Silence";
    case V1::SOFTMAX: return "Softmax";
    case V1::SOFTMAX_LOSS: return "SoftmaxWithLoss";
    case V1::SPLIT: return "Split";
    case V1::SLICE: return "Slice";
    case V1::TANH: return "TanH";
    case V1::WINDOW_DATA: return "WindowData";
    case V1::THRESHOLD: return "Threshold";
  }
  return "";
}

void upgrade_v1_layers(proto::NetParameter& net, FileProblems& problems) {
  if (net.layers_size() == 0) return;
  if (net.layer_size() > 0)
    problems.add(net.layers(0).source_line(),
                 "the file mixes V1 `layers { }` with `layer { }`; write all layers in one format");
  for (const V1& old : net.layers()) *net.add_layer() = upgraded(old, problems);
  net.clear_layers();
}

void upgrade_input_header(proto::NetParameter& net, FileProblems& problems) {
  if (net.input_size() == 0) {
    if (net.input_shape_size() > 0 || net.input_dim_size() > 0)
      problems.add(0, "input_shape or input_dim is given without an `input:` name");
    return;
  }
  proto::LayerParameter input;
  input.set_name("input");
  input.set_type("Input");
  const int inputs = net.input_size();
  if (net.input_shape_size() > 0 && net.input_dim_size() > 0)
    problems.add(0, "the header gives both input_shape and input_dim; give one of them");
  else if (net.input_shape_size() > 0 && net.input_shape_size() != inputs)
    problems.add(0, cat("the header names ", inputs, " input(s) but gives ", net.input_shape_size(),
                        " input_shape; give one per input"));
  else if (net.input_dim_size() > 0 && net.input_dim_size() != 4 * inputs)
    problems.add(0, cat("the header names ", inputs, " input(s) but gives ", net.input_dim_size(),
                        " input_dim; give four (N, C, H, W) per input"));
  else if (net.input_shape_size() == 0 && net.input_dim_size() == 0)
    problems.add(0, "the header names inputs but gives no input_shape or input_dim for them");
  for (int i = 0; i < inputs; ++i) {
    input.add_top(net.input(i));
    proto::BlobShape& shape = *input.mutable_input_param()->add_shape();
    if (i < net.input_shape_size()) shape = net.input_shape(i);
    for (int d = 4 * i; d < 4 * i + 4 && d < net.input_dim_size(); ++d) shape.add_dim(net.input_dim(d));
  }
  proto::NetParameter out = net;
  out.clear_input();
  out.clear_input_shape();
  out.clear_input_dim();
  out.clear_layer();
  *out.add_layer() = std::move(input);
  for (const auto& layer : net.layer()) *out.add_layer() = layer;
  net = std::move(out);
}

void upgrade_moved_fields(proto::NetParameter& net, FileProblems& problems) {
  for (proto::LayerParameter& layer : *net.mutable_layer()) {
    if (layer.has_data_param()) move_transformation(*layer.mutable_data_param(), *layer.mutable_transform_param());
    if (layer.has_image_data_param())
      move_transformation(*layer.mutable_image_data_param(), *layer.mutable_transform_param());
    if (layer.has_window_data_param())
      move_transformation(*layer.mutable_window_data_param(), *layer.mutable_transform_param());
    if (layer.has_concat_param()) {
      auto& p = *layer.mutable_concat_param();
      rename_axis(p, p.has_concat_dim(), p.concat_dim(), "concat_dim", layer, problems);
      p.clear_concat_dim();
    }
    if (layer.has_slice_param()) {
      auto& p = *layer.mutable_slice_param();
      rename_axis(p, p.has_slice_dim(), p.slice_dim(), "slice_dim", layer, problems);
      p.clear_slice_dim();
    }
    if (layer.type() == "BatchNorm") layer.clear_param();
  }
}

}  // namespace cgdp
