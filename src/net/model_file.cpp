// Model files: protobuf's text-format parser with an error collector that keeps line:column.
#include "cgdp/net/model_file.hpp"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace {

// Keeps the first error; protobuf reports 0-based line and column.
class FirstError final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (message_.empty()) message_ = cat(line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

template <typename Message>
Message parse_text(const std::string& text, const std::string& source_name,
                   google::protobuf::TextFormat::ParseInfoTree* locations = nullptr) {
  Message message;
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(locations);
  if (!parser.ParseFromString(text, &message))
    throw ModelError(cat(source_name, ":", errors.message().empty() ? "1:1: cannot parse" : errors.message()));
  return message;
}

}  // namespace

proto::NetParameter parse_model(const std::string& text, const std::string& source_name) {
  google::protobuf::TextFormat::ParseInfoTree locations;
  auto net = parse_text<proto::NetParameter>(text, source_name, &locations);
  const auto* layer_field = proto::NetParameter::descriptor()->FindFieldByName("layer");
  for (int i = 0; i < net.layer_size(); ++i)
    net.mutable_layer(i)->set_source_line(locations.GetLocation(layer_field, i).line + 1);
  return net;
}

std::string located(const std::string& source, const proto::LayerParameter& layer) {
  return layer.has_source_line() ? cat(source, ":", layer.source_line()) : source;
}

proto::NetParameter load_model(const std::string& path) {
  return parse_model(read_file(path), path);
}

proto::SolverParameter load_solver(const std::string& path) {
  return parse_text<proto::SolverParameter>(read_file(path), path);
}

std::string find_model_file(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(name_or_path, ec)) return name_or_path;
  // CGDP_MODELS_DIR in the environment: a build run where its source tree is not (a GPU machine).
  const char* env = std::getenv("CGDP_MODELS_DIR");
  const std::string dir = env && *env ? env : CGDP_MODELS_DIR;
  for (const std::string& candidate :
       {cat(dir, "/", name_or_path), cat(dir, "/", name_or_path, ".prototxt")})
    if (fs::exists(candidate, ec)) return candidate;
  return name_or_path;  // load_model() reports it missing, under the name the user gave
}

}  // namespace cgdp
