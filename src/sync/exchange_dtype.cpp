// --exchange-dtype's names.
#include "cgdp/sync/exchange_dtype.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

ExchangeDtype parse_exchange_dtype(const std::string& text) {
  if (text == "fp32") return ExchangeDtype::Fp32;
  if (text == "bf16") return ExchangeDtype::Bf16;
  if (text == "fp16") return ExchangeDtype::Fp16;
  throw UsageError(cat("--exchange-dtype '", text, "': expected fp32, bf16 or fp16"));
}

const char* to_string(ExchangeDtype dtype) {
  switch (dtype) {
    case ExchangeDtype::Fp32:
      return "fp32";
    case ExchangeDtype::Bf16:
      return "bf16";
    case ExchangeDtype::Fp16:
      return "fp16";
  }
  return "?";
}

}  // namespace cgdp
