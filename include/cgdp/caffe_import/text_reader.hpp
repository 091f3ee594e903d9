// Caffe's text format (prototxt) through protobuf's parser, with its messages put in cgdp's words.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <string>

#include "cgdp/caffe_import/problems.hpp"

namespace cgdp {

using TextLocations = google::protobuf::TextFormat::ParseInfoTree;

// Parses `text` into `message`. Every unknown field name is a problem (all of them are found); a
// syntax error or an unknown enum value stops the parse, adds its problem and returns false.
// `locations`, when given, receives where each field was read.
bool parse_caffe_text(const std::string& text, google::protobuf::Message& message,
                      FileProblems& problems, TextLocations* locations = nullptr);

// Parses a binary protobuf file's bytes (.caffemodel, .binaryproto); false if they are not one.
bool parse_caffe_binary(const std::string& bytes, google::protobuf::Message& message);

// The name users see for a message type: "LayerParameter", not "cgdp.proto.LayerParameter".
std::string caffe_message_name(const google::protobuf::Descriptor& type);

}  // namespace cgdp
