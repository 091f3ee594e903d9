// Text and binary protobuf parsing; protobuf's error texts rephrased for people who write prototxt.
#include "cgdp/caffe_import/text_reader.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>

#include <climits>
#include <regex>

namespace cgdp {

namespace {

// Caffe's messages nest a handful deep; protobuf's parser recurses once per level, so a file
// nesting thousands of `layer {` would overflow the stack before any message about it.
constexpr int kMaxNesting = 100;

std::string without_package(const std::string& name) {
  const std::string prefix = "cgdp.proto.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

// protobuf says 'Message type "cgdp.proto.X" has no field named "y".'; we name the field first.
std::string rephrased(const std::string& message) {
  static const std::regex no_field(R"re(Message type "([^"]+)" has no field named "([^"]+)"\.?)re");
  static const std::regex bad_enum(R"re(Unknown enumeration value of "([^"]+)" for field "([^"]+)"\.?)re");
  if (message.starts_with("Message is too deep"))
    return cat("messages nested more than ", kMaxNesting, " deep");
  std::smatch m;
  if (std::regex_match(message, m, no_field)) {
    const std::string type = without_package(m[1].str());
    return cat("unknown field '", m[2].str(), "': Caffe's ", type, " has no such field",
               type == "LayerParameter" ? " (a field of one of its *_param messages?)" : "");
  }
  if (std::regex_match(message, m, bad_enum))
    return cat("'", m[1].str(), "' is not a value that field '", m[2].str(), "' takes");
  return message;
}

class Collector final : public google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(FileProblems& problems) : problems_(problems) {}
  // protobuf counts lines and columns from 0.
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    problems_.add(line + 1, rephrased(message), column + 1);
  }
  // With unknown fields allowed, protobuf reports each one as a warning and skips it.
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    AddError(line, column, message);
  }

 private:
  FileProblems& problems_;
};

}  // namespace

bool parse_caffe_text(const std::string& text, google::protobuf::Message& message,
                      FileProblems& problems, TextLocations* locations) {
  Collector collector(problems);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(true);  // so that every unknown name is reported, not only the first
  parser.WriteLocationsTo(locations);
  parser.SetRecursionLimit(kMaxNesting);
  const bool parsed = parser.ParseFromString(text, &message);
  if (!parsed && problems.empty()) problems.add(1, "cannot parse the file as Caffe's text format");
  return parsed;
}

bool parse_caffe_binary(const std::string& bytes, google::protobuf::Message& message) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  in.SetTotalBytesLimit(INT_MAX);  // VGG-16's .caffemodel is 528 MB, past protobuf's 64 MB default
  return bytes.size() <= INT_MAX && message.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

std::string caffe_message_name(const google::protobuf::Descriptor& type) {
  return without_package(type.full_name());
}

}  // namespace cgdp
