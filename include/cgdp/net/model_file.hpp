// Reads model and solver files in protobuf text format; errors name file:line:column.
#pragma once

#include <string>

#include "cgdp.pb.h"

namespace cgdp {

// Each layer's LayerParameter::source_line is set to the line of its `layer {`.
proto::NetParameter load_model(const std::string& path);
proto::NetParameter parse_model(const std::string& text, const std::string& source_name);
// "file:line" of a layer read from a model file, else "file": where errors about it point.
std::string located(const std::string& source, const proto::LayerParameter& layer);
proto::SolverParameter load_solver(const std::string& path);

// Resolves a model name or path: an existing path wins, else <models>/<name>(.prototxt), where
// <models> is $CGDP_MODELS_DIR if set, else the source tree's models/.
std::string find_model_file(const std::string& name_or_path);

}  // namespace cgdp
