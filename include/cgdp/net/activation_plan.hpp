// The activation arena (GeePS's memory manager, on a plan): every activation's values take bytes
// of one device buffer only while some layer still needs them, and when the device's budget asks
// for it the largest ones wait in pinned host memory between their last forward use and their
// first backward use; so do the indices a layer keeps for its backward (max pooling's argmax).
// Every iteration touches them in the same order, so the whole schedule is known before the first
// one. In a 16-bit run (--precision bf16|fp16) the activations whose every backward
// reader rounds them to 16 bits anyway, or reads only their sign, wait in the arena as 16-bit
// copies instead (packed): half the bytes, the same results; and unless the run asks for exact
// packs, so do the normalised values BatchNorm keeps, rounded.
//
// Steps: layer i's forward is step i, its backward step 2L-1-i (L layers). The arena is placed in
// half steps: a step first widens the packs its backward reads, then computes, so a 16-bit copy
// widened at a step and a gradient that step's compute first writes may share bytes.
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

// What waits in 16 bits between forward and backward in a 16-bit run (--pack-activations).
enum class Packing {
  None,   // nothing: every activation in fp32
  Exact,  // what every backward reader rounds to 16 bits anyway, or reads the sign of: same bits
  // That, and rounded: values a backward may read rounded (Layer::backward_may_round): the
  // normalised values BatchNorm keeps, as PyTorch's AMP keeps BatchNorm's input in 16 bits, and
  // LRN's input in bf16.
  Rounding,
};

// What a run asks of its nets: owned, or planned in an arena of at most `arena_limit` bytes.
struct ActivationMemoryPlan {
  ActivationMemory memory = ActivationMemory::Owned;
  int64_t arena_limit = kNoArenaLimit;
  Packing pack = Packing::Rounding;  // in a 16-bit run
  bool write_over = true;  // a layer's output over its packed input (Net::plan_activations)
  // Layers whose weight waits in pinned host memory and passes through the device in slices
  // (Net's streamed weights): the last resort of a run that does not fit (fit_offload).
  std::vector<std::string> streamed_weights;
};

// One storage unit: a blob's values with the blobs that alias them (in place, Split, Eltwise).
struct PlannedActivation {
  // "conv1", or for what a layer keeps for its backward "bn1 (kept)", "pool1 (indices)"
  std::string name;
  int64_t bytes = 0;
  int produced = 0;          // first step that writes it
  int last_forward = 0;      // last forward step that touches it
  int first_backward = -1;   // first backward step that reads it; -1: none does
  int last_backward = -1;    // last one
  bool kept_to_end = false;  // an output read after the pass (loss, accuracy): never freed
  // Set by the net: a 16-bit run, and every backward reader gets the same bits from a 16-bit copy
  // (Layer::backward_exact_from_16_bits), or (Packing::Rounding) some reader may read it rounded
  // (Layer::backward_may_round) and the others get the same bits: `rounds`.
  bool packable = false;
  bool rounds = false;
  // Every backward reader reads the 16-bit copy itself (Layer::backward_reads_packed): when packed,
  // it is never widened back, and the copy stays until the last backward reader.
  bool read_packed = false;
  // Every backward reader reads only its signs (Layer::backward_reads_only_sign): packed, it is
  // narrowed keeping every sign (narrow_keeping_signs), so it packs exactly in fp16 too.
  bool signs_only = false;
  // Set by the net: the unit whose bytes these values take, -1 for bytes of their own. Their
  // producer writes them over its input (Layer::forward_in_place), which no step reads after it
  // but from its 16-bit copy: that unit is packed and read packed, its copy taken the step before.
  int takes_bytes_of = -1;
  // Set by plan_activation_arena: the forward step whose layer writes over these values, or -1.
  int written_over = -1;
  // Set by plan_activation_arena.
  bool packed =
      false;  // a 16-bit copy holds it from its last forward use to its first backward one
  int64_t pack_offset = 0;  // the copy's place in the arena, when packed
  bool offloaded = false;
  int fetch = -1;           // when offloaded: the step its copy back is issued
  int64_t offset = 0;       // in the arena
  int64_t host_offset = 0;  // in the host buffer, when offloaded
  // Set by the net once the buffers exist.
  void* device_ptr = nullptr;
  void* host_ptr = nullptr;
  void* pack_ptr = nullptr;
  // What its copies move, when offloaded: the 16-bit copy when packed, else the values.
  void* moved_device_ptr() const { return packed ? pack_ptr : device_ptr; }
  // Backward reads only its 16-bit copy: never widened back.
  bool only_packed() const { return packed && read_packed; }
};

// An activation's gradient, when the net plans it in the same arena (a train net's planned
// activations): alive from the backward step that first writes it (its last reader's) to the one
// that last reads it (its writer's). Neither packed nor offloaded: no pass reads it twice.
struct PlannedGradient {
  std::string name;  // "conv1 (gradient)"
  int64_t bytes = 0;
  LiveRange live;
  int64_t offset = 0;  // in the arena; set by plan_activation_arena
};

struct ActivationPlan {
  static constexpr int kLead = 2;  // backward steps a copy back starts at least before its use
  static constexpr int kLag = 1;   // forward steps a copy out may take before its bytes are reused

  int steps = 0;  // 2L
  int64_t arena_bytes = 0;
  int64_t host_bytes = 0;
  std::vector<PlannedActivation> activations;
  std::vector<PlannedGradient> gradients;  // sharing the arena with the values

  // When the unit's bytes must be in the arena.
  std::vector<LiveRange> live(const PlannedActivation& a) const;
  // When a packed unit's 16-bit copy must: written after its last forward step, read at the start
  // of its first backward one (both on the compute stream, so they overlap the unit's own bytes),
  // or when read packed until its last; when it is offloaded too, only until its copy out and
  // from its copy back.
  std::vector<LiveRange> pack_live(const PlannedActivation& a) const;
  static int64_t pack_bytes(const PlannedActivation& a) { return a.bytes / 2; }  // of float values
  // The forward step after which a packed unit's 16-bit copy is written: its last forward one, or
  // the one before a layer writes over its values.
  static int copy_step(const PlannedActivation& a) {
    return a.written_over >= 0 ? a.written_over - 1 : a.last_forward;
  }
  // What an offloaded unit's copies move: its 16-bit copy when packed, else its values.
  static int64_t moved_offset(const PlannedActivation& a) {
    return a.packed ? a.pack_offset : a.offset;
  }
  static int64_t moved_bytes(const PlannedActivation& a) {
    return a.packed ? pack_bytes(a) : a.bytes;
  }
  // Whether a 16-bit copy would free its bytes for at least one step.
  bool can_pack(const PlannedActivation& a) const;
  int packed_count() const;
  int64_t packed_bytes() const;  // the values that wait in 16 bits (their fp32 size)
  int64_t rounded_bytes() const;  // those of them that come back rounded (their fp32 size)
  // Whether waiting on the host would free its bytes for at least one step.
  bool can_offload(const PlannedActivation& a) const;
  // Step at which a copy back is issued (its second live range begins): as early as the arena
  // allows (plan_activation_arena), at the latest kLead steps before the first backward use.
  int fetch_step(const PlannedActivation& a) const {
    return a.fetch >= 0 ? a.fetch : a.first_backward - kLead;
  }
  int offloaded_count() const;
  // Bytes copied each way per pass (forward and backward of one micro-batch): packed ones in 16
  // bits.
  int64_t bytes_each_way() const;
};

// What must wait for offloaded unit `a`'s copy out, since it takes a's bytes after they are free:
// the steps whose compute writes there (a unit produced, packed or unpacked there) and the
// offloaded units fetched there (their copy back waits; a itself among them). Fetched: indices
// into plan.activations.
struct CopyOutWaiters {
  std::vector<int> write_steps, fetched;
};
CopyOutWaiters copy_out_waiters(const ActivationPlan& plan, const PlannedActivation& a);

// Where the placed arena reaches highest, and what holds its bytes there (inspect --memory).
struct ArenaPeak {
  int step = 0;       // whole step (a layer's forward or backward)
  int64_t bytes = 0;  // the arena's top there: its size before rounding up to its alignment
  struct Holder {
    std::string name;  // "conv1", "conv1 (16 bits)", "conv1 (gradient)"
    int64_t bytes = 0;
  };
  std::vector<Holder> holders;  // the most bytes first
};
ArenaPeak arena_peak(const ActivationPlan& plan);

// Places `activations` (offsets, packed and offloaded flags) and `gradients` (offsets) so that the
// arena needs at most `limit` bytes: every packable unit packed, then by liveness alone, then
// moving (a packed unit's 16-bit copy, or the values) to the host units that are away from the
// device at the step where the arena is fullest (the one or two with the fewest bytes that are
// enough there, else the largest); then each moved unit comes back to the device, the largest
// first, if the arena still fits without moving it; then one, two or three units away at the
// busiest step move instead where they fit with fewer bytes; then each copy back moves as early
// as the arena still fits, so that the copies stream while backward runs instead of each waiting
// for its turn.
// Returns the plan; its arena_bytes exceeds `limit` when even every unit that can wait on the host
// does not make it fit.
ActivationPlan plan_activation_arena(std::vector<PlannedActivation> activations, int steps,
                                     int64_t limit = std::numeric_limits<int64_t>::max(),
                                     std::vector<PlannedGradient> gradients = {});

}  // namespace cgdp
