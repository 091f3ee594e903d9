// The activation arena (GeePS's memory manager, on a plan): every activation's values take bytes
// of one device buffer only while some layer still needs them, and when the device's budget asks
// for it the largest ones wait in pinned host memory between their last forward use and their
// first backward use. Every iteration touches them in the same order, so the whole schedule is
// known before the first one.
//
// Steps: layer i's forward is step i, its backward step 2L-1-i (L layers).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cgdp/net/liveness.hpp"

namespace cgdp {

// Where a net's activations' values live: each in memory of its own, or in one arena the net
// plans by liveness (and, to fit a budget, partly on the host).
enum class ActivationMemory { Owned, Planned };

inline constexpr int64_t kNoArenaLimit = std::numeric_limits<int64_t>::max();

// What a run asks of its nets: owned, or planned in an arena of at most `arena_limit` bytes.
struct ActivationMemoryPlan {
  ActivationMemory memory = ActivationMemory::Owned;
  int64_t arena_limit = kNoArenaLimit;
};

// One storage unit: a blob's values with the blobs that alias them (in place, Split, Eltwise).
struct PlannedActivation {
  std::string name;  // "conv1", or "bn1 (kept)" for what a layer keeps for its backward
  int64_t bytes = 0;
  int produced = 0;          // first step that writes it
  int last_forward = 0;      // last forward step that touches it
  int first_backward = -1;   // first backward step that reads it; -1: none does
  int last_backward = -1;    // last one
  bool kept_to_end = false;  // an output read after the pass (loss, accuracy): never freed
  // Set by plan_activation_arena.
  bool offloaded = false;
  int fetch = -1;           // when offloaded: the step its copy back is issued
  int64_t offset = 0;       // in the arena
  int64_t host_offset = 0;  // in the host buffer, when offloaded
  // Set by the net once the buffers exist.
  void* device_ptr = nullptr;
  void* host_ptr = nullptr;
};

struct ActivationPlan {
  static constexpr int kLead = 2;  // backward steps a copy back starts at least before its use
  static constexpr int kLag = 1;   // forward steps a copy out may take before its bytes are reused

  int steps = 0;  // 2L
  int64_t arena_bytes = 0;
  int64_t host_bytes = 0;
  std::vector<PlannedActivation> activations;

  // When the unit's bytes must be in the arena.
  std::vector<LiveRange> live(const PlannedActivation& a) const;
  // Whether waiting on the host would free its bytes for at least one step.
  bool can_offload(const PlannedActivation& a) const;
  // Step at which a copy back is issued (its second live range begins): as early as the arena
  // allows (plan_activation_arena), at the latest kLead steps before the first backward use.
  int fetch_step(const PlannedActivation& a) const {
    return a.fetch >= 0 ? a.fetch : a.first_backward - kLead;
  }
  int offloaded_count() const;
  // Bytes copied each way per pass (forward and backward of one micro-batch).
  int64_t bytes_each_way() const;
};

// What must wait for offloaded unit `a`'s copy out, since it takes a's bytes after they are free:
// the units produced there (their producing step waits) and the offloaded units fetched there
// (their copy back waits; a itself among them). Indices into plan.activations.
struct CopyOutWaiters {
  std::vector<int> produced, fetched;
};
CopyOutWaiters copy_out_waiters(const ActivationPlan& plan, const PlannedActivation& a);

// Places `activations` (offsets, offloaded flags) so that the arena needs at most `limit` bytes:
// first by liveness alone, then moving to the host, one at a time, the largest unit that is away
// from the device at the step where the arena is fullest; then each copy back moves as early as
// the arena still fits, so that the copies stream while backward runs instead of each waiting
// for its turn. Returns the plan; its arena_bytes exceeds `limit` when even every unit that can
// wait on the host does not make it fit.
ActivationPlan plan_activation_arena(std::vector<PlannedActivation> activations, int steps,
                                     int64_t limit = std::numeric_limits<int64_t>::max());

}  // namespace cgdp
