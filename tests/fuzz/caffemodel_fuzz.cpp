// A .caffemodel (a binary NetParameter, V1 or current) as --weights reads it into blobs.
#include "cgdp/caffe_import/stored_weights.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cgdp::fuzz::expect_cgdp_errors_only(
      [&] { (void)cgdp::caffemodel_weights(cgdp::fuzz::bytes_of(data, size), "fuzz.caffemodel"); });
  return 0;
}
