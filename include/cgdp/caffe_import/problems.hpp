// The problems found in one file, collected so that a user sees all of them in one run.
#pragma once

#include <string>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

class FileProblems {
 public:
  explicit FileProblems(std::string source) : source_(std::move(source)) {}

  // `line` and `column` are 1-based; 0 when not known ("file:line: what", "file: what").
  void add(int line, std::string what, int column = 0) { problems_.push_back({line, column, std::move(what)}); }
  bool empty() const { return problems_.empty(); }
  const std::string& source() const { return source_; }
  // "file:line: what", one per problem, by line (those of the whole file first).
  std::vector<std::string> lines() const;

  // Throws one ModelError whose message holds every problem, one per line.
  void throw_if_any() const;

 private:
  struct Problem {
    int line, column;
    std::string what;
  };
  std::string source_;
  std::vector<Problem> problems_;
};

}  // namespace cgdp
