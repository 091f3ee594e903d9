// Loss scaling for 16-bit gradients (Micikevicius et al., "Mixed Precision Training", 2018; what
// PyTorch's GradScaler does): backward starts from the loss times `value()`, so gradients too
// small for fp16 survive its rounding, and the update divides it out again. Dynamic: a step whose
// summed gradient holds an Inf or NaN is skipped and halves the scale; `growth_interval` finite
// steps in a row double it. Static: a fixed scale whose overflowing steps are skipped alike.
#pragma once

#include <cstdint>
#include <string>

namespace cgdp {

struct LossScaleSettings {
  bool dynamic = false;
  double initial = 1;  // 1 and static: no scaling, no check
  int64_t growth_interval = 2000;
};

// --loss-scale: "auto" (dynamic in fp16, off otherwise), "off", "dynamic" (from 2^16),
// "dynamic:START" or a fixed scale (numbers >= 1); UsageError naming the flag otherwise.
LossScaleSettings parse_loss_scale(const std::string& text, bool fp16, int64_t growth_interval,
                                   const char* flag = "--loss-scale");

class LossScale {
 public:
  // Below this a gradient overflows unscaled: the run fails rather than skipping forever.
  static constexpr double kMinimum = 1;

  explicit LossScale(LossScaleSettings settings = {});

  // Whether steps are checked for a finite gradient (any scaling at all).
  bool active() const { return settings_.dynamic || settings_.initial != 1; }
  bool dynamic() const { return settings_.dynamic; }
  double value() const { return value_; }
  int64_t skipped_steps() const { return skipped_; }
  int64_t finite_run() const { return finite_run_; }

  enum class Change { kNone, kHalved, kDoubled };
  // Records one step: `finite` is whether its gradient was (the step ran) or not (skipped).
  // Throws RuntimeCheckError when a dynamic scale would fall below kMinimum.
  Change record(bool finite);
  // The state a checkpoint kept.
  void restore(double value, int64_t finite_run, int64_t skipped);

 private:
  LossScaleSettings settings_;
  double value_;
  int64_t finite_run_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace cgdp
