// The convolution algorithms cuDNN's search chose, keyed by what the choice depends on: the GPU
// model and cuDNN version (not the device index, so every worker on a box of identical GPUs runs
// the same algorithms), the pass, and the problem (shapes, type, options). A checkpoint stores the
// table and a resume loads it, so the resumed run computes with the algorithms, and so the bits,
// of the run it continues. Backend-independent text, so the CPU build reads and writes it too.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cgdp {

// cuDNN's three convolution passes, each with its own algorithms.
enum class ConvPass { Forward, BackwardData, BackwardFilter };

// A pass a layer runs and the problem its choice is keyed by (less the GPU): what the memory
// estimate looks up to count the scratch that stored choices need
// (ConvolutionLayer::cudnn_problem).
struct ConvPassProblem {
  ConvPass pass = ConvPass::Forward;
  std::vector<int64_t> problem;
};

struct ConvChoiceKey {
  std::string gpu;               // e.g. "NVIDIA H100 80GB HBM3 sm_90 cuDNN 91002"
  int pass = 0;                  // a ConvPass
  std::vector<int64_t> problem;  // shapes, element size, geometry, options
  auto operator<=>(const ConvChoiceKey&) const = default;
};

struct ConvChoice {
  int algo = 0;           // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int64_t workspace = 0;  // bytes of scratch it needs
  int math = 0;           // a cudnnMathType_t
  bool operator==(const ConvChoice&) const = default;
};

class ConvAlgorithmTable {
 public:
  // The one every layer of this process uses.
  static ConvAlgorithmTable& process();

  // The stored choice for `key`, or search()'s, stored. Thread-safe; held during the search, so
  // two workers never search the same problem twice.
  ConvChoice find_or_search(const ConvChoiceKey& key, const std::function<ConvChoice()>& search);

  // One line per choice, "gpu<TAB>pass<TAB>p1,p2,...<TAB>algo<TAB>workspace<TAB>math".
  std::string to_text() const;
  // Adds the choices of to_text()'s form, replacing this process's for the same keys (a resumed
  // run repeats the run it continues). Throws IoError naming `source`, the line and what was
  // expected, and then adds nothing.
  void merge_text(std::string_view text, const std::string& source);

  // The stored choice for `key`, if any; never searches.
  std::optional<ConvChoice> find(const ConvChoiceKey& key) const;
  // The most scratch the choices for every one of `passes` need on GPU model `gpu`, or on any GPU
  // model in the table when `gpu` is empty (the most of those that have them all); nullopt when
  // one is missing, so that a search (within the cap) would run.
  std::optional<int64_t> stored_scratch(const std::vector<ConvPassProblem>& passes,
                                        const std::string& gpu) const;
  size_t size() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<ConvChoiceKey, ConvChoice> choices_;
};

}  // namespace cgdp
