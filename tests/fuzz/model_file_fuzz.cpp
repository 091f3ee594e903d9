// A model file (prototxt) as --model reads it: parsed, upgraded, checked against the vocabulary,
// then each phase's layers wired as Net does before it builds any tensor.
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/wiring_check.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cgdp::fuzz::expect_cgdp_errors_only([&] {
    const std::string source = "fuzz.prototxt";
    const cgdp::proto::NetParameter net =
        cgdp::parse_model(cgdp::fuzz::bytes_of(data, size), source);
    for (cgdp::Phase phase : {cgdp::Phase::Train, cgdp::Phase::Test}) {
      const cgdp::proto::NetParameter phase_net = cgdp::filter_phase(net, phase);
      cgdp::check_wiring(phase_net, source);
      (void)cgdp::insert_splits(phase_net, source);
    }
  });
  return 0;
}
