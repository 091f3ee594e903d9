// A Caffe net as cgdp reads it: parsed (text or binary), upgraded to the current format, and
// checked against what cgdp implements, with every problem of the file reported at once.
#pragma once

#include <string>

#include "cgdp.pb.h"

namespace cgdp {

// A model file's text: V1 layers and the deploy header upgraded, moved fields put in place, each
// layer's line kept in source_line. Throws ModelError listing every problem, one per line.
proto::NetParameter import_net_text(const std::string& text, const std::string& source);

// A binary NetParameter (.caffemodel), V1 or current, upgraded the same way. Its layers are read
// for their blobs only, so the vocabulary is not checked. Throws ModelError if it is not one.
proto::NetParameter import_net_binary(const std::string& bytes, const std::string& source);

}  // namespace cgdp
