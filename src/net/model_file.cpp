// Model and solver files by path or by name; reading them is caffe_import's.
#include "cgdp/net/model_file.hpp"

#include <cstdlib>
#include <filesystem>

#include "cgdp/caffe_import/net_import.hpp"
#include "cgdp/caffe_import/text_reader.hpp"
#include "cgdp/caffe_import/vocabulary.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

proto::NetParameter parse_model(const std::string& text, const std::string& source_name) {
  return import_net_text(text, source_name);
}

std::string located(const std::string& source, const proto::LayerParameter& layer) {
  return layer.has_source_line() ? cat(source, ":", layer.source_line()) : source;
}

proto::NetParameter load_model(const std::string& path) {
  return parse_model(read_file(path), path);
}

proto::SolverParameter load_solver(const std::string& path) {
  FileProblems problems(path);
  proto::SolverParameter solver;
  TextLocations where;
  if (parse_caffe_text(read_file(path), solver, problems, &where))
    check_solver_vocabulary(solver, &where, problems);
  problems.throw_if_any();
  return solver;
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
