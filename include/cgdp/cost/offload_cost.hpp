// What keeping activations on the host costs a pass (net/activation_plan.hpp): the compute
// stream's steps with the copies out and back on their own links beside them. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/cost/profile.hpp"

namespace cgdp {

// One offloaded activation, in steps of the pass (forward i is step i, backward i is 2L-1-i).
struct OffloadCopy {
  int out_after = 0;  // copied out once this step has run
  int fetch_at = 0;   // copied back from when this step is issued
  int needed_at = 0;  // the step that waits for it
  int64_t bytes = 0;
  // What takes its bytes once they are free waits for it to be out: steps that write there, and
  // the copies back (indices into the pass's copies) that land there.
  std::vector<int> steps_after_out, fetches_after_out;
};

struct OffloadPassCost {
  double compute_us = 0;  // the steps alone
  double pass_us = 0;     // with the copies: steps that wait for a copy back start late
  double history_us = 0;  // the solver's history staged in and out at the step (history_staging_us)
  double streamed_us = 0;  // weights streamed through the device (streamed_weights_us)
  // Of an iteration of one pass.
  double slowdown() const {
    return compute_us > 0 ? (pass_us + history_us + streamed_us) / compute_us - 1 : 0;
  }
};

// Weights of `bytes` that wait on the host, copied on the compute stream's time: forward brings
// them in; backward again, with their gradient in and out; the update brings weights and
// gradients in and takes the weights out (their history is history_staging_us's). In bf16 each
// pass narrows the weight once more than a resident one (whose narrowing the profile's layer
// times hold): `narrowings` more passes over the fp32 weight, priced as copies in.
double streamed_weights_us(int64_t bytes, const LinkCost& in, const LinkCost& out,
                           int narrowings = 0);

// A step whose history (`bytes`) waits on the host: pieces of `piece_bytes` come in on `in`, and
// each goes back out on `out` once updated (the update itself is not counted): the slower link's
// whole stream plus one piece on the other.
double history_staging_us(int64_t bytes, int64_t piece_bytes, const LinkCost& in,
                          const LinkCost& out);

// The part of a copy's time the layers lose when copies run on their own cores (the CPU
// backend, `shared_cores` > 0; DMA: 0): the exchange's calibrated contention_factor over the
// cores, bounded below by one core's share (the factor, a difference of two noisy passes, is
// often 0) and above by all of them (a copy on one thread cannot stop more than every core for
// its time; the factor has measured 30 and more).
double cpu_copy_share(double contention_factor, int shared_cores);

// `step_us`: each step's compute time. Copies on one link run one after another in issue order;
// a copy back starts after the copies out of the bytes it lands in, and a step that writes bytes
// still being copied out waits for that copy. `shared`: the part of each copy's time the compute
// loses besides (cpu_copy_share on the CPU backend; 0 for DMA).
OffloadPassCost predict_offload_pass(const std::vector<double>& step_us,
                                     std::vector<OffloadCopy> copies, const LinkCost& out,
                                     const LinkCost& in, double shared = 0);

}  // namespace cgdp
