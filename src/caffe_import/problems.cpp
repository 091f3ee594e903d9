// Collected problems of one file, reported together.
#include "cgdp/caffe_import/problems.hpp"

#include <algorithm>

namespace cgdp {

std::vector<std::string> FileProblems::lines() const {
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Problem& a, const Problem& b) { return a.line < b.line; });
  std::vector<std::string> out;
  for (const Problem& p : sorted)
    out.push_back(p.line <= 0     ? cat(source_, ": ", p.what)
                  : p.column <= 0 ? cat(source_, ":", p.line, ": ", p.what)
                                  : cat(source_, ":", p.line, ":", p.column, ": ", p.what));
  return out;
}

void FileProblems::throw_if_any() const {
  if (problems_.empty()) return;
  std::string message;
  for (const std::string& line : lines()) message += (message.empty() ? "" : "\n") + line;
  throw ModelError(message);
}

}  // namespace cgdp
