// A safetensors file as load_safetensors reads it: header, byte ranges, then every tensor's values.
#include "cgdp/io/safetensors.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cgdp::fuzz::expect_cgdp_errors_only([&] {
    const cgdp::SafetensorsFile file(cgdp::fuzz::bytes_of(data, size), "fuzz.safetensors");
    for (const auto& [name, entry] : file.tensors()) {
      (void)file.values<float>(name);
      (void)file.values<double>(name);
    }
  });
  return 0;
}
