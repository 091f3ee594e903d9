// The order of the steps that turn a Caffe model file into the net cgdp builds.
#include "cgdp/caffe_import/net_import.hpp"

#include "cgdp/caffe_import/problems.hpp"
#include "cgdp/caffe_import/text_reader.hpp"
#include "cgdp/caffe_import/upgrade.hpp"
#include "cgdp/caffe_import/vocabulary.hpp"

namespace cgdp {

namespace {

// Each layer's line, from where the parser read its `layer {` (or V1's `layers {`).
template <typename Layers>
void keep_lines(Layers& layers, const google::protobuf::FieldDescriptor* field, const TextLocations& where) {
  for (int i = 0; i < layers.size(); ++i)
    layers.Mutable(i)->set_source_line(where.GetLocation(field, i).line + 1);
}

}  // namespace

proto::NetParameter import_net_text(const std::string& text, const std::string& source) {
  FileProblems problems(source);
  proto::NetParameter net;
  TextLocations where;
  if (!parse_caffe_text(text, net, problems, &where)) problems.throw_if_any();
  const auto* type = proto::NetParameter::descriptor();
  const auto* layer_field = type->FindFieldByName("layer");
  keep_lines(*net.mutable_layer(), layer_field, where);
  keep_lines(*net.mutable_layers(), type->FindFieldByName("layers"), where);
  std::vector<const TextLocations*> layer_locations;
  for (int i = 0; i < net.layer_size(); ++i) layer_locations.push_back(where.GetTreeForNested(layer_field, i));
  layer_locations.resize(static_cast<size_t>(net.layer_size() + net.layers_size()), nullptr);
  upgrade_v1_layers(net, problems);
  if (net.input_size() > 0) layer_locations.insert(layer_locations.begin(), nullptr);
  upgrade_input_header(net, problems);
  upgrade_moved_fields(net, problems);
  check_net_vocabulary(net, &where, layer_locations, problems);
  problems.throw_if_any();
  return net;
}

proto::NetParameter import_net_binary(const std::string& bytes, const std::string& source) {
  proto::NetParameter net;
  if (!parse_caffe_binary(bytes, net))
    throw ModelError(cat(source, ": not a Caffe model (a binary NetParameter, as .caffemodel files are)"));
  FileProblems problems(source);
  upgrade_v1_layers(net, problems);
  upgrade_moved_fields(net, problems);
  problems.throw_if_any();
  return net;
}

}  // namespace cgdp
