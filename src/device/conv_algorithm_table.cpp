// The process's convolution choices and their text form for checkpoints.
#include "cgdp/device/conv_algorithm_table.hpp"

#include <algorithm>
#include <charconv>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t next = text.find(sep, at);
    parts.push_back(text.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return parts;
    at = next + 1;
  }
}

// The whole of `text` as an integer, or an IoError naming the field.
int64_t integer(std::string_view text, const std::string& where, const char* field) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw IoError(cat(where, ": ", field, " '", text, "' is not an integer"));
  return value;
}

}  // namespace

ConvAlgorithmTable& ConvAlgorithmTable::process() {
  static ConvAlgorithmTable table;
  return table;
}

ConvChoice ConvAlgorithmTable::find_or_search(const ConvChoiceKey& key,
                                              const std::function<ConvChoice()>& search) {
  const std::lock_guard lock(mutex_);
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;
  const ConvChoice choice = search();
  choices_.emplace(key, choice);
  return choice;
}

std::optional<ConvChoice> ConvAlgorithmTable::find(const ConvChoiceKey& key) const {
  const std::lock_guard lock(mutex_);
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;
  return std::nullopt;
}

std::optional<int64_t> ConvAlgorithmTable::stored_scratch(
    const std::vector<ConvPassProblem>& passes, const std::string& gpu) const {
  std::vector<std::string> gpus{gpu};
  if (gpu.empty()) {
    const std::lock_guard lock(mutex_);
    gpus.clear();
    for (const auto& [key, choice] : choices_)
      if (gpus.empty() || gpus.back() != key.gpu) gpus.push_back(key.gpu);  // the map sorts by gpu
  }
  std::optional<int64_t> most;
  for (const std::string& g : gpus) {
    int64_t scratch = 0;
    bool all = true;
    for (const ConvPassProblem& p : passes) {
      const std::optional<ConvChoice> c = find({g, static_cast<int>(p.pass), p.problem});
      if (!c) {
        all = false;
        break;
      }
      scratch = std::max(scratch, c->workspace);
    }
    if (all) most = std::max(most.value_or(0), scratch);
  }
  return most;
}

std::string ConvAlgorithmTable::to_text() const {
  const std::lock_guard lock(mutex_);
  std::string text;
  for (const auto& [key, choice] : choices_) {
    std::string problem;
    for (int64_t v : key.problem) problem += cat(problem.empty() ? "" : ",", v);
    text += cat(key.gpu, "\t", key.pass, "\t", problem, "\t", choice.algo, "\t", choice.workspace, "\t",
                choice.math, "\n");
  }
  return text;
}

void ConvAlgorithmTable::merge_text(std::string_view text, const std::string& source) {
  std::map<ConvChoiceKey, ConvChoice> read;
  int line_number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    const std::string where = cat(source, ": convolution algorithms, line ", line_number);
    const std::vector<std::string_view> f = split(line, '\t');
    if (f.size() != 6)
      throw IoError(cat(where, ": expected 6 tab-separated fields (gpu, pass, problem, algorithm, "
                               "workspace, math), got ", f.size()));
    ConvChoiceKey key{std::string(f[0]), static_cast<int>(integer(f[1], where, "pass")), {}};
    for (std::string_view v : split(f[2], ',')) key.problem.push_back(integer(v, where, "problem value"));
    const ConvChoice choice{static_cast<int>(integer(f[3], where, "algorithm")),
                            integer(f[4], where, "workspace"), static_cast<int>(integer(f[5], where, "math"))};
    if (key.gpu.empty() || choice.workspace < 0 || choice.algo < 0)
      throw IoError(cat(where, ": an empty GPU name or a negative algorithm or workspace"));
    read[key] = choice;
  }
  const std::lock_guard lock(mutex_);
  for (const auto& [key, choice] : read) choices_[key] = choice;  // all or nothing: parsed first
}

size_t ConvAlgorithmTable::size() const {
  const std::lock_guard lock(mutex_);
  return choices_.size();
}

void ConvAlgorithmTable::clear() {
  const std::lock_guard lock(mutex_);
  choices_.clear();
}

}  // namespace cgdp
