// The loss scale's state machine; the trainer applies it (loss seeds, update scale, messages).
#include "cgdp/solver/loss_scale.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// A scale >= kMinimum, or nullopt.
std::optional<double> scale_number(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < LossScale::kMinimum)
    return std::nullopt;
  return value;
}

}  // namespace

LossScaleSettings parse_loss_scale(const std::string& text, bool fp16, int64_t growth_interval,
                                   const char* flag) {
  if (growth_interval < 1)
    throw UsageError(cat(flag, "-growth-interval ", growth_interval, ": expected a count >= 1"));
  LossScaleSettings s;
  s.growth_interval = growth_interval;
  // 2^16, PyTorch's GradScaler's start: the first steps halve it to what the net tolerates.
  constexpr double kStart = 65536;
  if (text == "off") return s;
  if (text == "auto") {
    s.dynamic = fp16;
    s.initial = fp16 ? kStart : 1;
    return s;
  }
  if (text == "dynamic") {
    s.dynamic = true;
    s.initial = kStart;
    return s;
  }
  const bool dynamic = text.starts_with("dynamic:");
  if (const auto value = scale_number(dynamic ? text.substr(8) : text)) {
    s.dynamic = dynamic;
    s.initial = *value;
    return s;
  }
  throw UsageError(
      cat(flag, " ", text,
          ": expected auto, off, dynamic, dynamic:START or a fixed scale (numbers >= 1)"));
}

LossScale::LossScale(LossScaleSettings settings) : settings_(settings), value_(settings.initial) {}

LossScale::Change LossScale::record(bool finite) {
  if (finite) {
    if (!settings_.dynamic || ++finite_run_ < settings_.growth_interval) return Change::kNone;
    finite_run_ = 0;
    value_ *= 2;
    return Change::kDoubled;
  }
  ++skipped_;
  finite_run_ = 0;
  if (!settings_.dynamic) return Change::kNone;
  if (value_ / 2 < kMinimum)
    throw RuntimeCheckError(cat("the summed gradient is not finite even at loss scale ", value_,
                                " (", skipped_,
                                " steps skipped): the unscaled gradient overflows "
                                "(try a lower learning rate, or --precision bf16)"));
  value_ /= 2;
  return Change::kHalved;
}

void LossScale::restore(double value, int64_t finite_run, int64_t skipped) {
  value_ = value;
  finite_run_ = finite_run;
  skipped_ = skipped;
}

}  // namespace cgdp
