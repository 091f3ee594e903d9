// The activation arena (net/activation_plan.hpp): the placement never lets two activations alive
// at one step share a byte, the plan offloads only what must wait and fits the limit when it
// can, and a net whose activations are planned gives the very same bits as one that owns them.
#include "cgdp/net/activation_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "cgdp/cost/offload_cost.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/layers/weight_slices.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/host_history.hpp"
#include "cgdp/train/memory_estimate.hpp"
#include "cgdp/train/trainer.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

// A chain of `n` layers, each producing one activation of `bytes` that its own backward reads.
std::vector<PlannedActivation> chain(int n, int64_t bytes) {
  std::vector<PlannedActivation> units;
  for (int i = 0; i < n; ++i) {
    PlannedActivation a;
    a.name = cat("a", i);
    a.bytes = bytes;
    a.produced = i;
    a.last_forward = std::min(i + 1, n - 1);  // the next layer reads it
    a.first_backward = a.last_backward = 2 * n - 1 - (i + 1 < n ? i + 1 : i);
    units.push_back(a);
  }
  units.back().kept_to_end = true;  // the loss
  return units;
}

// No two things alive at one step share a byte: activations, the packed ones' 16-bit copies, and
// gradients.
// No two buffers alive at one step share a byte, but for a 16-bit copy widened at the step where
// a gradient is first written: the widening runs before the step's compute.
void expect_disjoint(const ActivationPlan& plan) {
  struct Buffer {
    std::string name;
    Occupant bytes;
    int widened = -1, first_written = -1;  // a pack's last step, a gradient's first
    int unit = -1, takes_bytes_of = -1;    // values: which unit, and whose bytes it takes
  };
  std::vector<Buffer> all;
  for (size_t k = 0; k < plan.activations.size(); ++k) {
    const PlannedActivation& a = plan.activations[k];
    all.push_back(
        {a.name, {plan.live(a), a.bytes, a.offset}, -1, -1, static_cast<int>(k), a.takes_bytes_of});
    if (a.packed)
      all.push_back({a.name + " (16-bit)",
                     {plan.pack_live(a), ActivationPlan::pack_bytes(a), a.pack_offset},
                     a.read_packed ? -1 : a.first_backward});
  }
  // An output written over its input meets it at its writer's step, in the same bytes.
  const auto written_over = [&](const Buffer& a, const Buffer& b) {
    if (a.unit < 0 || b.takes_bytes_of != a.unit) return false;
    const PlannedActivation &in = plan.activations[a.unit], &out = plan.activations[b.unit];
    EXPECT_EQ(in.offset, out.offset) << b.name;
    EXPECT_EQ(in.written_over, out.produced) << b.name;
    return a.bytes.live.back().last == out.produced;
  };
  for (size_t k = 0; k < plan.gradients.size(); ++k) {
    const PlannedGradient& g = plan.gradients[k];
    all.push_back({cat("gradient ", k), {{g.live}, g.bytes, g.offset}, -1, g.live.first});
  }
  const auto only_at_the_widening = [](const Buffer& pack, const Buffer& gradient) {
    if (pack.widened < 0 || gradient.first_written != pack.widened) return false;
    for (const LiveRange& r : pack.bytes.live)
      if (r.first <= gradient.bytes.live[0].last && gradient.bytes.live[0].first < r.last)
        return false;  // they meet before the pack's last step
    return true;
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const Buffer& a = all[i];
    EXPECT_LE(a.bytes.offset + a.bytes.bytes, plan.arena_bytes) << a.name;
    for (size_t j = i + 1; j < all.size(); ++j) {
      const Buffer& b = all[j];
      if (only_at_the_widening(a, b) || only_at_the_widening(b, a) || written_over(a, b) ||
          written_over(b, a))
        continue;
      EXPECT_FALSE(a.bytes.overlaps_in_time(b.bytes) && a.bytes.overlaps_in_space(b.bytes))
          << a.name << " and " << b.name;
    }
  }
}

TEST(ActivationPlan, ForwardOnlyChainNeedsTwoActivations) {
  std::vector<PlannedActivation> units = chain(8, 1024);
  for (PlannedActivation& a : units) a.first_backward = a.last_backward = -1;
  const ActivationPlan plan = plan_activation_arena(units, 16);
  expect_disjoint(plan);
  EXPECT_EQ(plan.offloaded_count(), 0);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);  // a layer's input and output, nothing more
}

// Layer 1 writes its output over its input, which backward reads only from its 16-bit copy
// (takes_bytes_of): the copy is taken after step 0, and the two take one place where they would
// take two, the copy beside them.
TEST(ActivationPlan, AnOutputWrittenOverItsInputTakesItsBytes) {
  std::vector<PlannedActivation> units(3);
  units[0] = {.name = "in",
              .bytes = 1024,
              .produced = 0,
              .last_forward = 1,
              .first_backward = 4,
              .last_backward = 5,
              .packable = true,
              .read_packed = true};
  units[1] = {.name = "out", .bytes = 1024, .produced = 1, .last_forward = 2};
  units[2] = {.name = "loss", .bytes = 256, .produced = 2, .last_forward = 2, .kept_to_end = true};
  const ActivationPlan apart = plan_activation_arena(units, 6);
  units[1].takes_bytes_of = 0;
  const ActivationPlan plan = plan_activation_arena(units, 6);
  expect_disjoint(plan);
  const PlannedActivation &in = plan.activations[0], &out = plan.activations[1];
  EXPECT_TRUE(in.packed);
  EXPECT_EQ(in.written_over, 1);
  EXPECT_EQ(ActivationPlan::copy_step(in), 0);
  EXPECT_EQ(plan.pack_live(in).front().first, 0);
  EXPECT_EQ(in.offset, out.offset);
  EXPECT_EQ(apart.arena_bytes, 2 * 1024 + 512);   // at step 1: both and the copy
  EXPECT_EQ(plan.arena_bytes, 1024 + 512 + 256);  // at step 2: one, the copy and the loss
  EXPECT_EQ(arena_peak(plan).holders.front().name, "in, then out");
}

TEST(ActivationPlan, OffloadsOnlyWhatTheLimitAsks) {
  const int n = 12;
  const ActivationPlan all = plan_activation_arena(chain(n, 1024), 2 * n);
  EXPECT_EQ(all.offloaded_count(), 0);
  EXPECT_EQ(all.arena_bytes, n * 1024);  // every activation waits for its backward
  const int64_t limit = 6 * 1024;
  const ActivationPlan fit = plan_activation_arena(chain(n, 1024), 2 * n, limit);
  expect_disjoint(fit);
  EXPECT_LE(fit.arena_bytes, limit);
  EXPECT_GT(fit.offloaded_count(), 0);
  EXPECT_LT(fit.offloaded_count(), n);
  EXPECT_EQ(fit.bytes_each_way(), fit.offloaded_count() * 1024);
  for (const PlannedActivation& a : fit.activations)
    if (a.offloaded) EXPECT_TRUE(fit.can_offload(a)) << a.name;
  // Below what every offload can reach: the plan says so by exceeding the limit.
  const ActivationPlan short_of = plan_activation_arena(chain(n, 1024), 2 * n, 1024);
  EXPECT_GT(short_of.arena_bytes, 1024);
  expect_disjoint(short_of);
}

// A copy back issued two small steps before its use cannot hide behind them: each comes back as
// early as the arena still fits, never later than that and never before its copy out is done.
TEST(ActivationPlan, CopiesBackStartAsEarlyAsTheArenaAllows) {
  const int n = 12;
  const int64_t limit = 6 * 1024;
  const ActivationPlan plan = plan_activation_arena(chain(n, 1024), 2 * n, limit);
  expect_disjoint(plan);
  EXPECT_LE(plan.arena_bytes, limit);
  int earlier = 0;
  for (const PlannedActivation& a : plan.activations) {
    if (!a.offloaded) continue;
    EXPECT_LE(plan.fetch_step(a), a.first_backward - ActivationPlan::kLead) << a.name;
    EXPECT_GT(plan.fetch_step(a), a.last_forward + ActivationPlan::kLag + 1) << a.name;
    earlier += plan.fetch_step(a) < a.first_backward - ActivationPlan::kLead;
  }
  EXPECT_GT(earlier, 0);  // backward frees the deep layers' bytes: the early ones come sooner
}

// Where one small unit is enough, the plan moves it, not the largest one alive at that step: the
// largest would cost more copies than a budget only a little short needs.
TEST(ActivationPlan, MovesTheSmallestUnitThatIsEnough) {
  const int n = 12;
  std::vector<PlannedActivation> units = chain(n, 1024);
  units[2].bytes = 8 * 1024;
  const ActivationPlan all = plan_activation_arena(units, 2 * n);
  const ActivationPlan fit = plan_activation_arena(units, 2 * n, all.arena_bytes - 512);
  expect_disjoint(fit);
  EXPECT_LE(fit.arena_bytes, all.arena_bytes - 512);
  EXPECT_EQ(fit.bytes_each_way(), 1024);
  EXPECT_FALSE(fit.activations[2].offloaded);
}

// A plan moves about what the arena is over, never more with more memory: over limits from a
// twentieth of AlexNet's arena to all of it, each plan that fits moves at most the excess plus one
// unit (first fit's gaps), and no more than the plan before it with less. (Moving the largest unit
// at the fullest step, always, moved five units, 1,082 MiB, for an excess of 206 MiB; the smallest
// single unit that was enough, with max pooling's argmax in the arena, 718 MiB for 325.)
TEST(ActivationPlan, MovesAboutWhatTheArenaIsOverAndLessWithMore) {
  const proto::NetParameter model = load_model(find_model_file("alexnet"));
  MeasuringDevice device;  // counts, commits nothing
  Net<float> net(model, Phase::Train, device, 256, 1, "alexnet", ActivationMemory::Planned);
  net.plan_activations();
  const ActivationPlan whole = net.activation_plan();
  int64_t largest = 0;
  for (const PlannedActivation& a : whole.activations) largest = std::max(largest, a.bytes);
  int64_t before = std::numeric_limits<int64_t>::max();
  int moving = 0;
  for (int k = 10; k <= 200; ++k) {
    const int64_t limit = whole.arena_bytes * k / 200;
    const ActivationPlan plan =
        plan_activation_arena(whole.activations, whole.steps, limit, whole.gradients);
    if (plan.arena_bytes > limit) continue;
    expect_disjoint(plan);
    EXPECT_LE(plan.bytes_each_way(), whole.arena_bytes - limit + largest) << "limit " << limit;
    EXPECT_LE(plan.bytes_each_way(), before) << "limit " << limit;
    before = plan.bytes_each_way();
    moving += plan.offloaded_count() > 0;
  }
  EXPECT_GT(moving, 5);  // the sweep crossed plans that move something
}

// The gradients of chain(n): activation i's is written by layer i + 1's backward and read by
// layer i's.
std::vector<PlannedGradient> chain_gradients(int n, int64_t bytes) {
  std::vector<PlannedGradient> gradients;
  for (int i = 0; i + 1 < n; ++i)
    gradients.push_back({cat("g", i), bytes, {2 * n - 2 - i, 2 * n - 1 - i}});
  return gradients;
}

// What inspect --memory names at the arena's fullest step: every value, 16-bit copy and gradient
// alive there, the most bytes first; a packed unit by its copy alone.
TEST(ActivationPlan, ItsPeakNamesWhatHoldsTheArenaThere) {
  std::vector<PlannedActivation> units = chain(4, 0);
  for (int i = 0; i < 4; ++i) units[i].bytes = i < 3 ? 1024 * (i + 1) : 16;
  units[0].packable = true;
  std::vector<PlannedGradient> gradients;  // g_i: written by layer i + 1's backward, read by i's
  for (int i = 0; i < 3; ++i)
    gradients.push_back({cat("a", i, " (gradient)"), 1024 * (i + 1), {6 - i, 7 - i}});
  const ActivationPlan plan = plan_activation_arena(units, 8, kNoArenaLimit, gradients);
  ASSERT_TRUE(plan.activations[0].packed);
  const ArenaPeak peak = arena_peak(plan);
  EXPECT_EQ(peak.step, 4);  // layer 3's backward: a2 and its gradient, a1, a0's copy, the loss
  std::vector<std::string> names;
  int64_t held = 0;
  for (const ArenaPeak::Holder& h : peak.holders) names.push_back(h.name), held += h.bytes;
  EXPECT_EQ(names, (std::vector<std::string>{"a2", "a2 (gradient)", "a1", "a0 (16 bits)", "a3"}));
  EXPECT_EQ(held, 3072 + 3072 + 2048 + 512 + 16);
  EXPECT_EQ(peak.bytes, held);  // no gap there; the arena rounds it up to 256 bytes
  EXPECT_EQ(plan.arena_bytes, 8960);
}

// Gradients take the bytes of values already dead when backward writes them: a chain needs one
// activation more for them, not the two of a buffer of their own; with a limit, compute that
// first writes a gradient where an offloaded value's copy out still reads waits for that copy.
TEST(ActivationPlan, GradientsShareTheArenaWithDeadValues) {
  const int n = 12;
  const ActivationPlan values = plan_activation_arena(chain(n, 1024), 2 * n);
  const ActivationPlan both =
      plan_activation_arena(chain(n, 1024), 2 * n, kNoArenaLimit, chain_gradients(n, 1024));
  expect_disjoint(both);
  EXPECT_EQ(both.arena_bytes, values.arena_bytes + 1024);
  const ActivationPlan fit =
      plan_activation_arena(chain(n, 1024), 2 * n, 8 * 1024, chain_gradients(n, 1024));
  expect_disjoint(fit);
  EXPECT_LE(fit.arena_bytes, 8 * 1024);
  ASSERT_GT(fit.offloaded_count(), 0);
  for (const PlannedActivation& a : fit.activations) {
    if (!a.offloaded) continue;
    const CopyOutWaiters waiters = copy_out_waiters(fit, a);
    for (const PlannedGradient& g : fit.gradients)
      if (bytes_overlap(a.offset, a.bytes, g.offset, g.bytes))
        EXPECT_NE(std::find(waiters.write_steps.begin(), waiters.write_steps.end(), g.live.first),
                  waiters.write_steps.end())
            << a.name << "'s bytes, written as a gradient at step " << g.live.first;
  }
}

TEST(ActivationPlan, PlacementKeepsLiveBuffersApart) {
  // Odd sizes and lifetimes: first fit must still never overlap two live ones.
  std::vector<Occupant> occupants;
  for (int i = 0; i < 40; ++i)
    occupants.push_back(
        {{{i % 7, i % 7 + i % 5}, {20 + i % 3, 22 + i % 4}}, 100 + 37 * (i % 9), 0});
  std::vector<Occupant*> pointers;
  for (Occupant& o : occupants) pointers.push_back(&o);
  const int64_t total = place_by_liveness(pointers, 64);
  std::vector<const Occupant*> view(pointers.begin(), pointers.end());
  EXPECT_GE(total, peak_live_bytes(view));
  for (size_t i = 0; i < occupants.size(); ++i) {
    EXPECT_EQ(occupants[i].offset % 64, 0);
    for (size_t j = i + 1; j < occupants.size(); ++j)
      EXPECT_FALSE(occupants[i].overlaps_in_time(occupants[j]) &&
                   occupants[i].overlaps_in_space(occupants[j]));
  }
}

// Largest first leaves a gap here (10 bytes where 9 are alive at step 4); placing what holds the
// most bytes x steps first does not, and the placement keeps the better of its orders.
TEST(ActivationPlan, PlacementKeepsTheBestOfItsOrders) {
  std::vector<Occupant> occupants = {
      {{{5, 5}}, 4, 0}, {{{2, 3}}, 1, 0}, {{{4, 4}}, 3, 0}, {{{2, 5}}, 3, 0}, {{{1, 4}}, 3, 0}};
  std::vector<Occupant*> pointers;
  for (Occupant& o : occupants) pointers.push_back(&o);
  std::vector<const Occupant*> view(pointers.begin(), pointers.end());
  ASSERT_EQ(peak_live_bytes(view), 9);
  EXPECT_EQ(place_by_liveness(pointers, 1), 9);
  for (size_t i = 0; i < occupants.size(); ++i)
    for (size_t j = i + 1; j < occupants.size(); ++j)
      EXPECT_FALSE(occupants[i].overlaps_in_time(occupants[j]) &&
                   occupants[i].overlaps_in_space(occupants[j]))
          << i << " and " << j;
}

TEST(ActivationPlan, ANetsArenaIsSmallerThanItsActivations) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  MeasuringDevice owned_device, planned_device;
  Net<float> owned(model, Phase::Test, owned_device, 64, 1);
  Net<float> planned(model, Phase::Test, planned_device, 64, 1, "fashion_cnn",
                     ActivationMemory::Planned);
  planned.plan_activations();
  const ActivationPlan& plan = planned.activation_plan();
  int64_t sum = 0;
  for (const PlannedActivation& a : plan.activations) sum += a.bytes;
  EXPECT_GT(plan.activations.size(), 5u);
  EXPECT_LT(plan.arena_bytes, sum);
  EXPECT_LT(planned_device.memory_stats().device_bytes, owned_device.memory_stats().device_bytes);
  expect_disjoint(plan);
}

// Max pooling's argmax takes bytes of a train net's arena from the pooling's forward to its
// backward alone (fashion_cnn: pool1 and pool2), never packed; a test net keeps none.
TEST(ActivationPlan, MaxPoolingsArgmaxLivesInTheArenaUntilItsBackward) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  const ScopedLayerPrecision layers_in(Precision::kBf16);
  MeasuringDevice device;
  Net<float> net(model, Phase::Train, device, 8, 1, "fashion_cnn", ActivationMemory::Planned);
  net.plan_activations();
  const ActivationPlan& plan = net.activation_plan();
  std::set<std::string> kept;
  for (const PlannedActivation& a : plan.activations) {
    if (!a.name.ends_with(" (indices)")) continue;
    kept.insert(a.name);
    int i = 0;
    while (i < net.num_layers() && net.layer(i).name() != a.name.substr(0, a.name.size() - 10)) ++i;
    ASSERT_LT(i, net.num_layers()) << a.name;
    EXPECT_EQ(net.layer(i).type(), std::string("Pooling"));
    EXPECT_EQ(std::pair(a.produced, a.last_forward), std::pair(i, i)) << a.name;
    EXPECT_EQ(std::pair(a.first_backward, a.last_backward),
              std::pair(plan.steps - 1 - i, plan.steps - 1 - i))
        << a.name;
    EXPECT_FALSE(a.packed) << a.name;
    EXPECT_EQ(net.layer(i).kept_indices()->data(), a.device_ptr) << a.name;
  }
  EXPECT_EQ(kept, (std::set<std::string>{"pool1 (indices)", "pool2 (indices)"}));
  Net<float> test(model, Phase::Test, device, 8, 1);
  for (int i = 0; i < test.num_layers(); ++i) EXPECT_EQ(test.layer(i).kept_indices(), nullptr);
}

// A train net plans its activations' gradients in the values' arena: no buffer of their own, and
// less than the values' arena and that buffer side by side.
TEST(ActivationPlan, ATrainNetsGradientsLiveInItsArena) {
  const proto::NetParameter model = load_model(find_model_file("resnet_small"));
  MeasuringDevice owned_device, planned_device;
  Net<float> owned(model, Phase::Train, owned_device, 8, 1);
  Net<float> planned(model, Phase::Train, planned_device, 8, 1, "resnet_small",
                     ActivationMemory::Planned);
  planned.plan_activations();
  const ActivationPlan& plan = planned.activation_plan();
  EXPECT_EQ(planned.activation_gradient_bytes(), 0);
  EXPECT_GT(plan.gradients.size(), 5u);
  expect_disjoint(plan);
  const ActivationPlan values_alone = plan_activation_arena(plan.activations, plan.steps);
  EXPECT_LT(plan.arena_bytes, values_alone.arena_bytes + owned.activation_gradient_bytes());
  for (int i = 0; i < planned.num_layers(); ++i)
    for (const Blob<float>* top : planned.tops(i))
      if (top->diff_is_planned()) {
        const auto* diff = reinterpret_cast<const char*>(top->diff());
        const auto* arena = static_cast<const char*>(planned.idle_between_passes().ptr);
        EXPECT_TRUE(diff >= arena && diff < arena + plan.arena_bytes) << planned.layer(i).name();
      }
}

// In a 16-bit run what backward reads exactly from 16 bits waits as a 16-bit copy: a chain of such
// units needs little more than half the arena. A unit a reader needs in fp32 stays, as does one
// read right after its last forward use (nothing to gain) and the loss; a budget moves as little
// as it needs to the host: a 16-bit copy where that is enough.
TEST(ActivationPlan, PackedUnitsWaitInHalfTheBytes) {
  const int n = 12;
  std::vector<PlannedActivation> units = chain(n, 1024);
  const ActivationPlan fp32 = plan_activation_arena(units, 2 * n);
  for (PlannedActivation& a : units) a.packable = true;
  units[3].packable = false;  // its reader needs fp32
  const ActivationPlan packed = plan_activation_arena(units, 2 * n);
  expect_disjoint(packed);
  for (int i = 0; i < n; ++i) EXPECT_EQ(packed.activations[i].packed, i != 3 && i < n - 2) << i;
  EXPECT_EQ(packed.packed_bytes(), (n - 3) * 1024);
  EXPECT_EQ(packed.offloaded_count(), 0);
  EXPECT_LE(packed.arena_bytes, fp32.arena_bytes * 3 / 4);
  const ActivationPlan both = plan_activation_arena(units, 2 * n, packed.arena_bytes - 512);
  expect_disjoint(both);
  EXPECT_LE(both.arena_bytes, packed.arena_bytes - 512);
  // 512 bytes short: one 16-bit copy is enough, and moves half of what unit 3's fp32 values would.
  EXPECT_EQ(both.offloaded_count(), 1);
  EXPECT_EQ(both.bytes_each_way(), 512);
  EXPECT_FALSE(both.activations[3].offloaded);
  // Tighter still: packed units go to the host too, in 16 bits, and each copy moves what waits.
  const ActivationPlan tight = plan_activation_arena(units, 2 * n, 5 * 1024);
  expect_disjoint(tight);
  EXPECT_LE(tight.arena_bytes, 5 * 1024);
  int64_t moved = 0, packed_offloaded = 0;
  for (const PlannedActivation& a : tight.activations)
    if (a.offloaded) {
      moved += a.packed ? 512 : 1024;
      packed_offloaded += a.packed;
    }
  EXPECT_GT(packed_offloaded, 0);
  EXPECT_EQ(tight.bytes_each_way(), moved);
  EXPECT_EQ(tight.host_bytes, moved);  // 512 and 1024 are already aligned
}

// A packed unit whose backward readers all read the 16-bit copy itself (a ReLU's mask) is never
// widened: its fp32 bytes are free from its last forward step on, and the copy stays until its
// last backward reader, on the device or back from the host.
TEST(ActivationPlan, AValueReadPackedIsNeverWidened) {
  const int n = 12;
  std::vector<PlannedActivation> units = chain(n, 1024);
  for (PlannedActivation& a : units) a.packable = true;
  const ActivationPlan widened = plan_activation_arena(units, 2 * n);
  for (PlannedActivation& a : units) a.read_packed = true;
  const ActivationPlan read = plan_activation_arena(units, 2 * n);
  expect_disjoint(read);
  EXPECT_EQ(read.packed_count(), widened.packed_count());
  for (const PlannedActivation& a : read.activations) {
    if (!a.packed) continue;
    const std::vector<LiveRange> values = read.live(a), copy = read.pack_live(a);
    ASSERT_EQ(values.size(), 1u) << a.name;
    EXPECT_EQ(values[0].last, a.last_forward) << a.name;
    EXPECT_EQ(copy.back().last, a.last_backward) << a.name;
  }
  // Each backward step held a unit's 1 KiB of fp32 values beside its gradient; now half of that.
  EXPECT_LT(read.arena_bytes, widened.arena_bytes);
  const ActivationPlan tight = plan_activation_arena(units, 2 * n, read.arena_bytes - 512);
  expect_disjoint(tight);
  EXPECT_LE(tight.arena_bytes, read.arena_bytes - 512);
  ASSERT_GT(tight.offloaded_count(), 0);
  for (const PlannedActivation& a : tight.activations)
    if (a.offloaded) {
      EXPECT_TRUE(a.packed) << a.name;
      EXPECT_EQ(tight.pack_live(a).back().first, tight.fetch_step(a)) << a.name;
      EXPECT_EQ(tight.pack_live(a).back().last, a.last_backward) << a.name;
    }
}

// fashion_cnn in bf16: its input and the convolutions', pools' and first inner product's outputs
// (read back by ReLU masks and multiplying layers) wait in 16 bits; the last inner product's,
// which the loss reads in fp32, does not; in fp32 nothing does. fp16 rounds positives below 2^-25
// to zero, whose ReLU masks then drop their gradient (VGG-16 b2 trained to other bits): what only
// ReLU masks read back is narrowed keeping its signs, exact in either precision; ip1, which ip2
// reads too, stays fp32 in fp16 under exact packs and is held rounded under rounding packs.
TEST(ActivationPlan, ANetPacksWhatItsReadersRoundAnyway) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  const auto packed_units = [&](Precision precision, Packing packing) {
    const ScopedLayerPrecision layers_in(precision);
    MeasuringDevice device;
    Net<float> net(model, Phase::Train, device, 8, 1, "fashion_cnn", ActivationMemory::Planned);
    net.plan_activations(kNoArenaLimit, nullptr, packing);
    std::set<std::string> names;
    for (const PlannedActivation& a : net.activation_plan().activations)
      if (a.packed)
        names.insert(cat(a.name, a.read_packed ? " (read packed)" : "",
                         a.signs_only ? " signs" : "", a.rounds ? " rounds" : ""));
    return names;
  };
  // What only ReLU masks (here inside the convolutions) and convolutions read back is read from
  // the copy; an inner product's input is widened.
  const std::set<std::string> exact{"data (read packed)", "conv1 (read packed) signs",
                                    "pool1 (read packed)", "conv2 (read packed) signs", "pool2"};
  std::set<std::string> bf16 = exact, fp16_rounding = exact;
  bf16.insert("ip1");
  fp16_rounding.insert("ip1 rounds");
  EXPECT_EQ(packed_units(Precision::kBf16, Packing::Exact), bf16);
  EXPECT_EQ(packed_units(Precision::kBf16, Packing::Rounding), bf16);
  EXPECT_EQ(packed_units(Precision::kFp16, Packing::Exact), exact);
  EXPECT_EQ(packed_units(Precision::kFp16, Packing::Rounding), fp16_rounding);
  EXPECT_TRUE(packed_units(Precision::kFp32, Packing::Rounding).empty());
}

// resnet_small in bf16: exact packs leave BatchNorm's normalised values in fp32; rounding packs
// (the default) hold each of them in 16 bits too, marked as rounding, and change nothing else.
TEST(ActivationPlan, RoundingPacksAlsoHoldBatchNormsKeptValuesIn16Bits) {
  const proto::NetParameter model = load_model(find_model_file("resnet_small"));
  struct Packed {
    std::set<std::string> names, rounded;
    int64_t arena = 0;
  };
  const auto plan = [&](Packing packing) {
    const ScopedLayerPrecision layers_in(Precision::kBf16);
    MeasuringDevice device;
    Net<float> net(model, Phase::Train, device, 4, 1, "resnet_small", ActivationMemory::Planned);
    net.plan_activations(kNoArenaLimit, nullptr, packing);
    Packed p;
    for (const PlannedActivation& a : net.activation_plan().activations) {
      if (a.packed) p.names.insert(a.name);
      if (a.packed && a.rounds) p.rounded.insert(a.name);
    }
    p.arena = net.activation_plan().arena_bytes;
    return p;
  };
  std::set<std::string> batch_norms;
  for (const auto& layer : model.layer())
    if (layer.type() == "BatchNorm") batch_norms.insert(cat(layer.name(), " (kept)"));
  ASSERT_FALSE(batch_norms.empty());
  const Packed exact = plan(Packing::Exact), rounding = plan(Packing::Rounding);
  EXPECT_TRUE(exact.rounded.empty());
  EXPECT_EQ(rounding.rounded, batch_norms);
  std::set<std::string> both = exact.names;
  both.insert(batch_norms.begin(), batch_norms.end());
  EXPECT_EQ(rounding.names, both);
  EXPECT_LT(rounding.arena, exact.arena);
  EXPECT_TRUE(plan(Packing::None).names.empty());
}

// A step widens its packs before its compute writes the gradients it starts, so such a gradient
// may take a widened pack's bytes: fashion_cnn's plan does, where ip1 widens pool2 and writes its
// gradient (ExactPacking trains it to the very bits of a run without packs).
TEST(ActivationPlan, AGradientMayTakeTheBytesOfAPackWidenedAtItsFirstStep) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  const ScopedLayerPrecision layers_in(Precision::kBf16);
  MeasuringDevice device;
  Net<float> net(model, Phase::Train, device, 4, 1, "fashion_cnn", ActivationMemory::Planned);
  net.plan_activations(kNoArenaLimit, nullptr, Packing::Exact);
  const ActivationPlan& plan = net.activation_plan();
  expect_disjoint(plan);
  int shared = 0;
  for (const PlannedActivation& a : plan.activations)
    for (const PlannedGradient& g : plan.gradients)
      shared += a.packed && g.live.first == a.first_backward &&
                bytes_overlap(a.pack_offset, ActivationPlan::pack_bytes(a), g.offset, g.bytes);
  EXPECT_GT(shared, 0);
}

TrainConfig resnet_run() {
  TrainConfig c;
  c.model = "resnet_small";
  c.data = "synthetic";
  c.batch = 4;
  c.test_batch = 8;
  c.test_samples = 8;
  c.test_interval = -1;
  c.devices = 2;
  c.accumulate = 2;  // two passes per iteration through the same arena
  c.iterations = 3;
  c.solver.set_base_lr(0.01f);
  c.solver.set_momentum(0.9f);
  c.seed = 5;
  c.plain_output = true;
  return c;
}

// Every parameter in layer order (whatever the flat layout: streamed weights sit at its end),
// then the layers' state.
std::vector<float> parameters(Trainer& t) {
  std::vector<float> out;
  for (int i = 0; i < t.net().num_layers(); ++i)
    for (auto& blob : t.net().layer(i).params()) {
      out.resize(out.size() + static_cast<size_t>(blob->count()));
      t.net().device().copy(out.data() + out.size() - blob->count(), blob->data(), blob->bytes());
    }
  for (auto& [name, blob] : t.net().state_blobs()) {
    out.resize(out.size() + static_cast<size_t>(blob->count()));
    t.net().device().copy(out.data() + out.size() - blob->count(), blob->data(), blob->bytes());
  }
  return out;
}

int64_t model_learnable(const MemoryEstimate& m) {
  return m.parameters / int64_t{sizeof(float)};
}

// The most one device held: a CPU worker's own, or (CUDA) the workers sharing a GPU, summed.
int64_t device_peak(Trainer& t, bool cuda) {
  std::vector<int64_t> per_device(cuda ? std::max(cuda_device_count(), 1) : t.workers().size(), 0);
  for (const Worker& w : t.workers())
    per_device[w.index % per_device.size()] += w.device->memory_stats().device_peak_bytes;
  return *std::max_element(per_device.begin(), per_device.end());
}

// Trains `c` once and checks it with `expect`; under cgdp also in two halves, the second resumed
// from the first's checkpoint, and checks that.
void expect_trained_and_resumed(const TrainConfig& c, FILE* sink,
                                const std::function<void(Trainer&)>& expect) {
  {
    Trainer t(c, sink);
    t.run();
    expect(t);
  }
  if (c.sync != "cgdp") return;
  testing::TempDir dir;
  TrainConfig first = c;
  first.iterations = 2;
  first.snapshot_every = 2;
  first.snapshot_prefix = (dir / "run").string();
  Trainer(first, sink).run();
  TrainConfig second = c;
  second.resume_path = (dir / "run_iter_2.ckpt").string();
  Trainer t(second, sink);
  t.run();
  expect(t);
}

// Offloading moves bytes, never changes them: a ResNet (Splits, Eltwise sums, BatchNorm's kept
// values) trained within 60% of the memory it needs ends with the very same parameters, and no
// device ever holds more than its budget; with either scheme. (Planned by liveness, values and
// gradients in one arena, it fits 75% without moving a byte; its test net, never offloaded, is
// much of what so small a net needs.)
void expect_offload_changes_no_bit(TrainConfig c) {
  FILE* sink = std::fopen("/dev/null", "w");
  std::vector<float> owned;
  int64_t needed = 0;
  double owned_test_loss = 0;
  {
    Trainer t(c, sink);
    owned_test_loss = t.run().test_loss;
    owned = parameters(t);
    needed = device_peak(t, c.device_kind == "cuda");
    EXPECT_FALSE(t.net().activations_planned());
  }
  const int64_t budget = needed * 3 / 5;
  c.device_memory_gb = static_cast<double>(budget) / (1LL << 30);
  Trainer t(c, sink);
  const double test_loss = t.run().test_loss;  // the test net is planned too
  std::fclose(sink);
  ASSERT_TRUE(t.net().activations_planned());
  EXPECT_EQ(test_loss, owned_test_loss);
  EXPECT_GT(t.net().activation_plan().offloaded_count(), 0);
  EXPECT_LE(device_peak(t, c.device_kind == "cuda"), budget);
  const std::vector<float> offloaded = parameters(t);
  ASSERT_EQ(offloaded.size(), owned.size());
  EXPECT_EQ(0, std::memcmp(offloaded.data(), owned.data(), owned.size() * sizeof(float)));
}

class Offload : public ::testing::TestWithParam<const char*> {};

TEST_P(Offload, TrainsBitForBitWithinTheBudget) {
  TrainConfig c = resnet_run();
  c.sync = GetParam();
  expect_offload_changes_no_bit(c);
}

// The same on a GPU, where the copies run on their own streams beside compute and the budget
// also holds cuDNN's scratch (deterministic algorithms within 1 MiB: both runs choose the same).
TEST(OffloadOnCuda, TrainsBitForBitWithinTheBudget) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = resnet_run();
  c.device_kind = "cuda";
  c.batch = 16;  // activations well above the scratch the budget reserves
  c.cudnn_workspace_mb = 1;
  c.sync = "cgdp";
  expect_offload_changes_no_bit(c);
}

INSTANTIATE_TEST_SUITE_P(Schemes, Offload, ::testing::Values("cgdp", "ps0"));

// Exact packs move bytes, never change them: resnet_small in 16 bits (BatchNorm's kept values stay
// fp32, most of the rest waits in 16 bits) trains to the very same bits with packs as with every
// activation in fp32 memory of its own, on less memory; and again within 75% of that, with fp32
// values and 16-bit copies offloaded beside the packs (whose writes wait for those copies out),
// unless `offload` is false.
void expect_packing_changes_no_bit(TrainConfig c, bool offload = true) {
  FILE* sink = std::fopen("/dev/null", "w");
  const bool cuda = c.device_kind == "cuda";
  c.test_batch = c.test_samples = 4;  // the test net's arena is a floor no offload lowers
  c.pack_activations = "off";
  std::vector<float> fp32_kept;
  int64_t fp32_peak = 0;
  {
    Trainer t(c, sink);
    t.run();
    EXPECT_FALSE(t.net().activations_planned());
    fp32_kept = parameters(t);
    fp32_peak = device_peak(t, cuda);
  }
  c.pack_activations = "exact";
  int64_t packed_peak = 0;
  {
    Trainer t(c, sink);
    t.run();
    ASSERT_TRUE(t.net().activations_planned());
    EXPECT_GT(t.net().activation_plan().packed_count(), 0);
    EXPECT_EQ(t.net().activation_plan().offloaded_count(), 0);
    int read_packed = 0;  // ReLU masks read from the 16-bit copies themselves
    for (const PlannedActivation& a : t.net().activation_plan().activations)
      read_packed += a.only_packed();
    EXPECT_GT(read_packed, 0);
    packed_peak = device_peak(t, cuda);
    if (c.precision == "bf16")
      EXPECT_LT(packed_peak, fp32_peak);
    else  // fp16's exact packs leave the ReLUs' values in fp32: the peak may hold none of them
      EXPECT_LE(packed_peak, fp32_peak);
    const std::vector<float> got = parameters(t);
    ASSERT_EQ(got.size(), fp32_kept.size());
    EXPECT_EQ(0, std::memcmp(got.data(), fp32_kept.data(), got.size() * sizeof(float)));
  }
  if (!offload) {
    std::fclose(sink);
    return;
  }
  const int64_t budget = packed_peak * 3 / 4;
  c.device_memory_gb = static_cast<double>(budget) / (1LL << 30);
  Trainer t(c, sink);
  t.run();
  std::fclose(sink);
  int packed_offloaded = 0;
  for (const PlannedActivation& a : t.net().activation_plan().activations)
    packed_offloaded += a.packed && a.offloaded;
  EXPECT_GT(t.net().activation_plan().packed_count(), 0);
  EXPECT_GT(t.net().activation_plan().offloaded_count(), packed_offloaded);
  // 16-bit copies on the host too (fp16's exact packs are few: no ReLU's values).
  if (c.precision == "bf16") EXPECT_GT(packed_offloaded, 0);
  EXPECT_LE(device_peak(t, cuda), budget);
  const std::vector<float> got = parameters(t);
  EXPECT_EQ(0, std::memcmp(got.data(), fp32_kept.data(), got.size() * sizeof(float)));
}

// A small AlexNet: LRN after an in-place ReLU, max pooling after it (whose backward reads only
// its argmax), so the LRN's own backward is the only reader of its output. conv2's output is
// twice conv1's: the arena's fullest step, norm2's backward, no longer holds norm1.
const char* kLrnNet = R"(name: "LrnNet"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 4 dim: 3 dim: 20 dim: 20 } shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1" lrn_param { local_size: 5 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 64 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "norm2" type: "LRN" bottom: "conv2" top: "norm2"
  lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL } }
layer { name: "pool2" type: "Pooling" bottom: "norm2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "fc" bottom: "label" top: "accuracy"
  include { phase: TEST } }
)";

// A training run's parameters before and after, its plan and its device's peak.
struct PackRun {
  std::vector<float> before, after;
  ActivationPlan plan;
  int64_t peak = 0;
};

PackRun train_recording(const TrainConfig& c, FILE* sink) {
  Trainer t(c, sink);
  PackRun r;
  r.before = parameters(t);
  t.run();
  r.after = parameters(t);
  r.plan = t.net().activation_plan();
  r.peak = device_peak(t, false);
  return r;
}

// How far `other`'s parameters ended from `exact`'s, over how far training moved `exact`'s (root
// of the sums of squares); 0 for the same bits.
double apart_over_moved(const PackRun& exact, const PackRun& other) {
  EXPECT_EQ(other.after.size(), exact.after.size());
  double moved = 0, apart = 0;
  for (size_t i = 0; i < exact.after.size() && i < other.after.size(); ++i) {
    moved += std::pow(static_cast<double>(exact.after[i]) - exact.before[i], 2);
    apart += std::pow(static_cast<double>(other.after[i]) - exact.after[i], 2);
  }
  return std::sqrt(apart / moved);
}

TrainConfig lrn_net_run(const std::filesystem::path& dir, const std::string& device_kind) {
  TrainConfig c = resnet_run();
  c.model = (dir / "lrn_net.prototxt").string();
  std::ofstream(c.model) << kLrnNet;
  c.device_kind = device_kind;
  c.precision = "bf16";
  c.cudnn_workspace_mb = 1;
  c.test_batch = c.test_samples = 4;
  return c;
}

// LRN's backward computes its output again from its input: a planned net frees the LRNs' outputs
// once the poolings after them ran, and the small AlexNet trains (bf16, exact packs) to the
// parameters of the run that keeps every activation (packs off), in a smaller arena than if they
// stayed until the LRNs' backward.
void expect_lrn_outputs_freed_after_forward(const std::string& device_kind) {
  testing::TempDir dir;
  TrainConfig c = lrn_net_run(dir.path(), device_kind);
  FILE* sink = std::fopen("/dev/null", "w");
  std::vector<float> kept;
  {
    c.pack_activations = "off";
    Trainer t(c, sink);
    t.run();
    EXPECT_FALSE(t.net().activations_planned());
    kept = parameters(t);
  }
  c.pack_activations = "exact";
  Trainer t(c, sink);
  t.run();
  std::fclose(sink);
  const ActivationPlan& plan = t.net().activation_plan();
  std::vector<PlannedActivation> units = plan.activations;
  int freed = 0;
  for (PlannedActivation& a : units)
    if (a.name == "norm1" || a.name == "norm2") {
      EXPECT_EQ(a.first_backward, -1) << a.name;
      EXPECT_EQ(a.last_forward, a.produced + 1) << a.name;               // its pooling's forward
      a.first_backward = a.last_backward = plan.steps - 1 - a.produced;  // kept for the LRN
      ++freed;
    }
  EXPECT_EQ(freed, 2);
  EXPECT_LT(plan.arena_bytes,
            plan_activation_arena(units, plan.steps, kNoArenaLimit, plan.gradients).arena_bytes);
  const std::vector<float> got = parameters(t);
  ASSERT_EQ(got.size(), kept.size());
  EXPECT_EQ(0, std::memcmp(got.data(), kept.data(), got.size() * sizeof(float)));
}

TEST(LrnBackwardFromItsInput, FreesItsOutputAfterForwardAndChangesNoBit) {
  expect_lrn_outputs_freed_after_forward("cpu");
}

TEST(LrnBackwardFromItsInputOnCuda, FreesItsOutputAfterForwardAndChangesNoBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  expect_lrn_outputs_freed_after_forward("cuda");
}

// With rounding packs norm1's input waits for backward only as its bf16 copy, taken after relu1:
// norm1 writes its output over it (Layer::forward_in_place), and its backward its gradient over
// its output's (Layer::gradient_in_place); the small AlexNet trains to the bits of the run that
// keeps them apart, in a smaller arena (conv1 four times wider: the arena is fullest about norm1).
// norm2, within a channel, reads its fp32 input (CPU).
void expect_lrn_writes_over_its_input(const std::string& device_kind) {
  testing::TempDir dir;
  TrainConfig c = lrn_net_run(dir.path(), device_kind);
  std::string wider = kLrnNet;
  const std::string conv1 = "num_output: 8 ";
  wider.replace(wider.find(conv1), conv1.size(), "num_output: 32 ");
  std::ofstream(c.model) << wider;
  c.pack_activations = "on";
  FILE* sink = std::fopen("/dev/null", "w");
  c.write_outputs_over_inputs = false;
  const PackRun apart = train_recording(c, sink);
  c.write_outputs_over_inputs = true;
  Trainer t(c, sink);
  t.run();
  std::fclose(sink);
  const Net<float>& net = t.net();
  EXPECT_EQ(net.blob("norm1")->data(), net.blob("conv1")->data());
  EXPECT_NE(net.blob("norm2")->data(), net.blob("conv2")->data());
  EXPECT_EQ(net.blob("norm1")->diff(), net.blob("conv1")->diff());
  const ActivationPlan& plan = t.net().activation_plan();
  const auto unit = [&](const std::string& name) {
    for (const PlannedActivation& a : plan.activations)
      if (a.name == name) return a;
    ADD_FAILURE() << "no unit " << name;
    return PlannedActivation{};
  };
  EXPECT_EQ(ActivationPlan::copy_step(unit("conv1")), unit("norm1").produced - 1);
  EXPECT_GE(unit("norm1").takes_bytes_of, 0);
  EXPECT_EQ(unit("norm2").takes_bytes_of, -1);
  for (const PlannedActivation& a : apart.plan.activations) EXPECT_EQ(a.takes_bytes_of, -1);
  expect_disjoint(plan);
  EXPECT_LT(plan.arena_bytes, apart.plan.arena_bytes);
  const std::vector<float> got = parameters(t);
  ASSERT_EQ(got.size(), apart.after.size());
  EXPECT_EQ(0, std::memcmp(got.data(), apart.after.data(), got.size() * sizeof(float)));
  EXPECT_NE(apart.after, apart.before);
}

TEST(LrnInPlace, WritesOverItsPackedInputAndChangesNoBit) {
  expect_lrn_writes_over_its_input("cpu");
}

TEST(LrnInPlaceOnCuda, WritesOverItsPackedInputAndChangesNoBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  expect_lrn_writes_over_its_input("cuda");
}

// With rounding packs (--pack-activations on) the LRNs' inputs wait in bf16 too, rounded
// (LRNLayer::backward_may_round; their own bound: LrnFrom16Bits): the arena holds less, and the
// small AlexNet's parameters end closer to the exact run's than bf16's rounding of how far
// training moved them. Not in fp16, whose range an input not yet normalised may exceed.
TEST(LrnInputIn16Bits, RoundsInBf16AndMovesTheUpdateLittle) {
  testing::TempDir dir;
  TrainConfig c = lrn_net_run(dir.path(), "cpu");
  FILE* sink = std::fopen("/dev/null", "w");
  const auto train = [&](const char* precision, const char* mode) {
    c.precision = precision;
    c.pack_activations = mode;
    return train_recording(c, sink);
  };
  const PackRun exact = train("bf16", "exact"), rounding = train("bf16", "on"),
                fp16 = train("fp16", "on");
  std::fclose(sink);
  EXPECT_EQ(exact.plan.rounded_bytes(), 0);
  EXPECT_EQ(fp16.plan.rounded_bytes(), 0);
  int64_t inputs = 0;
  for (const PlannedActivation& a : rounding.plan.activations)
    if (a.name == "conv1" || a.name == "conv2") {  // the ReLUs run in place: the LRNs' inputs
      EXPECT_TRUE(a.packed && a.rounds) << a.name;
      inputs += a.bytes;
    }
  EXPECT_EQ(rounding.plan.rounded_bytes(), inputs);
  EXPECT_LT(rounding.plan.arena_bytes, exact.plan.arena_bytes);
  const double apart = apart_over_moved(exact, rounding);
  EXPECT_GT(apart, 0);
  EXPECT_LT(apart, 0x1p-8);  // measured: 1.0e-3
}

class ExactPacking : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactPacking, ChangesNoBitAndHoldsLess) {
  TrainConfig c = resnet_run();
  c.precision = GetParam();
  expect_packing_changes_no_bit(c);
}

// fashion_cnn: its convolutions' absorbed ReLUs read their masks from the 16-bit copies, to the
// same bits (in fp16 narrowed keeping their signs: ANetPacksWhatItsReadersRoundAnyway; under a
// budget its history, not its activations, would go to the host).
TEST_P(ExactPacking, MasksReadFromTheCopiesChangeNoBit) {
  TrainConfig c = resnet_run();
  c.model = "fashion_cnn";
  c.precision = GetParam();
  expect_packing_changes_no_bit(c, /*offload=*/false);
}

// Rounding packs (--pack-activations on, BatchNorm's kept values in 16 bits too) hold less than
// exact ones and train resnet_small to parameters whose distance from the exact run's is less than
// bf16's rounding of how far training moved them (the layer's own bound: BatchNormFrom16Bits).
TEST_P(ExactPacking, RoundingHoldsLessAndMovesTheUpdateLittle) {
  TrainConfig c = resnet_run();
  c.precision = GetParam();
  c.test_batch = c.test_samples = 4;
  FILE* sink = std::fopen("/dev/null", "w");
  const auto train = [&](const char* mode) {
    c.pack_activations = mode;
    return train_recording(c, sink);
  };
  const PackRun exact = train("exact"), rounding = train("on");
  std::fclose(sink);
  EXPECT_GT(rounding.plan.packed_count(), exact.plan.packed_count());
  EXPECT_LT(rounding.peak, exact.peak);
  const double apart = apart_over_moved(exact, rounding);
  EXPECT_GT(apart, 0);
  EXPECT_LT(apart, 0x1p-8);  // bf16's rounding (measured: 3e-5; fp16: 3e-6)
}

// The same on a GPU, where the packs are narrowed and widened by kernels on the compute stream.
TEST(PackingOnCuda, ChangesNoBitAndHoldsLess) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = resnet_run();
  c.device_kind = "cuda";
  c.batch = 16;
  c.cudnn_workspace_mb = 1;
  c.sync = "cgdp";
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    c.precision = precision;
    expect_packing_changes_no_bit(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, ExactPacking, ::testing::Values("bf16", "fp16"));

// The solver's history is needed only at the step: when the activations alone cannot bring a run
// within its budget, it waits in pinned host memory and comes through the device in pieces. Adam
// (two histories) trains to the same bits under a budget only that reaches, with no device above
// it, with either scheme (ps0: worker 0 alone updates); a checkpoint written from the host's copy
// resumes to those bits too.
void expect_history_on_host_bit_for_bit(const std::string& device_kind) {
  FILE* sink = std::fopen("/dev/null", "w");
  const bool cuda = device_kind == "cuda";
  for (const char* sync : {"cgdp", "ps0"}) {
    SCOPED_TRACE(sync);
    TrainConfig c = resnet_run();
    c.model = "fashion_cnn";  // parameters and history well above its activations
    c.device_kind = device_kind;
    c.cudnn_workspace_mb = 1;  // deterministic algorithms within it: both runs choose the same
    c.accumulate = 1;
    c.iterations = 4;
    c.solver.set_type("Adam");
    c.solver.set_base_lr(0.001f);
    c.sync = sync;
    std::vector<float> owned;
    int64_t budget = 0;
    {
      Trainer t(c, sink);
      t.run();
      owned = parameters(t);
      budget = device_peak(t, cuda) -
               t.net().learnable_count() * int64_t{sizeof(float)};  // half the history
    }
    c.device_memory_gb = static_cast<double>(budget) / (1LL << 30);
    const auto expect_owned_bits = [&](Trainer& t) {
      for (const Worker& w : t.workers())
        if (w.solver) EXPECT_EQ(w.solver->history_place(), HistoryPlace::Host);
      EXPECT_LE(device_peak(t, cuda), budget);
      const std::vector<float> got = parameters(t);
      ASSERT_EQ(got.size(), owned.size());
      EXPECT_EQ(0, std::memcmp(got.data(), owned.data(), owned.size() * sizeof(float)));
    };
    expect_trained_and_resumed(c, sink, expect_owned_bits);
  }
  std::fclose(sink);
}

TEST(Offload, HistoryOnTheHostTrainsAndResumesBitForBit) {
  expect_history_on_host_bit_for_bit("cpu");
}

// On a GPU the history's pieces come in and go out on copy streams of their own, beside the step.
TEST(OffloadOnCuda, HistoryOnTheHostTrainsAndResumesBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  expect_history_on_host_bit_for_bit("cuda");
}

// When even the history on the host is not enough, InnerProduct weights wait there too and pass
// through the device in slices (VGG-16's fc6 at 40%; here of 256 KiB, as the slices of the run
// that keeps its weights on the device, or the bits could differ): fashion_cnn, whose ip1 is most
// of its parameters, trains under a budget below its parameters, gradients and history to the same
// bits, alone, with cgdp summing the streamed gradients on the host (of two micro-batches each,
// folded there) and with ps0 (up its tree, the updated weight copied back down), and a
// checkpoint resumes to them.
void expect_streamed_weights_bit_for_bit(const char* precision) {
  FILE* sink = std::fopen("/dev/null", "w");
  const ScopedWeightSliceBytes slices(256 << 10);  // ip1's 3 MiB in 13 slices, in both runs
  for (const char* sync : {"local", "cgdp", "ps0"}) {
    SCOPED_TRACE(sync);
    TrainConfig c = resnet_run();
    c.model = "fashion_cnn";
    c.precision = precision;
    c.sync = sync;
    c.accumulate = c.sync == "cgdp" ? 2 : 1;  // cgdp: the streamed gradients fold on the host
    c.iterations = 3;
    c.devices = c.sync == "local" ? 1 : 2;
    std::vector<float> owned;
    int64_t budget = 0;
    {
      Trainer t(c, sink);
      t.run();
      owned = parameters(t);
      budget = device_peak(t, false) - 3 * t.net().learnable_count() * int64_t{sizeof(float)} / 2;
    }
    c.device_memory_gb = static_cast<double>(budget) / (1LL << 30);
    const auto expect_owned_bits = [&](Trainer& t) {
      EXPECT_FALSE(t.net().host_flat_data().empty()) << "no weight was streamed";
      EXPECT_LE(device_peak(t, false), budget);
      const std::vector<float> got = parameters(t);
      ASSERT_EQ(got.size(), owned.size());
      EXPECT_EQ(0, std::memcmp(got.data(), owned.data(), owned.size() * sizeof(float)));
    };
    expect_trained_and_resumed(c, sink, expect_owned_bits);
  }
  std::fclose(sink);
}

TEST(Offload, StreamedWeightsTrainAndResumeBitForBit) {
  expect_streamed_weights_bit_for_bit("fp32");
}

// In bf16 the streamed slices are narrowed into the stage and multiplied by oneDNN's bf16
// matmuls, the resident weight's slices by the same calls.
TEST(Offload, StreamedWeightsTrainAndResumeBitForBitInBf16) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 kernels: bf16 weights do not stream";
  expect_streamed_weights_bit_for_bit("bf16");
}

// Rounded operands (fp16 here; bf16 on CPUs without bf16 kernels takes the same path) round each
// staged slice in place: the resident run's rounded weight, sliced. Fails if a slice is
// multiplied unrounded.
TEST(Offload, StreamedWeightsTrainAndResumeBitForBitInFp16) {
  expect_streamed_weights_bit_for_bit("fp16");
}

TEST(OffloadBudget, OffRefusesWhatDoesNotFit) {
  FILE* sink = std::fopen("/dev/null", "w");
  TrainConfig c = resnet_run();
  c.device_memory_gb = 0.001;  // 1 MiB: resnet_small at batch 4 needs several
  c.offload = "off";
  try {
    Trainer t(c, sink);
    FAIL() << "a run past its budget was accepted with --offload off";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--device-memory-gb 0.001"), std::string::npos)
        << e.what();
  }
  c.offload = "auto";
  try {  // far below what any plan reaches: refused too, saying what the plan did
    Trainer t(c, sink);
    FAIL() << "a run past what offloading reaches was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(" offloaded to the host"), std::string::npos) << e.what();
  }
  std::fclose(sink);
}

// One copy out after step 1 and back for step 8, each taking 10 steps' time on a 1 GB/s link:
// the copy back starts when the copy out ends (step 12's time) and step 8 waits for it.
TEST(OffloadCost, ACopyBackThatCannotHideDelaysItsStep) {
  const std::vector<double> steps(10, 100.0);
  const std::vector<OffloadCopy> copies = {{1, 6, 8, 1'000'000, {}, {}}};
  const OffloadPassCost slow = predict_offload_pass(steps, copies, {1, 0}, {1, 0});
  EXPECT_DOUBLE_EQ(slow.compute_us, 1000);
  EXPECT_DOUBLE_EQ(slow.pass_us,
                   200 + 1000 + 1000 + 200);  // out ends at 1200, back at 2200, 2 steps
  EXPECT_NEAR(slow.slowdown(), 1.4, 1e-12);
  const OffloadPassCost fast = predict_offload_pass(steps, copies, {1000, 0}, {1000, 0});
  EXPECT_DOUBLE_EQ(fast.pass_us, 1000);  // 1 us copies hide behind the steps between
  // Copies on the layers' own cores (the CPU backend) take half their time from the compute too.
  EXPECT_DOUBLE_EQ(predict_offload_pass(steps, copies, {1, 0}, {1, 0}, 0.5).pass_us,
                   2400 + 0.5 * 2000);
  // Step 3 writes into the bytes being copied out: it starts when the copy ends (1200), and the
  // copy back, issued at step 6 (1500), lands at 2500 for step 8.
  std::vector<OffloadCopy> reused = copies;
  reused[0].steps_after_out = {3};
  EXPECT_DOUBLE_EQ(predict_offload_pass(steps, reused, {1, 0}, {1, 0}).pass_us, 2500 + 200);
}

// On the CPU backend a copy takes from the layers between one core's share of its time and all
// of it, whatever the exchange's calibration says; DMA takes nothing.
TEST(OffloadCost, ACopyOnTheLayersCoresTakesOneCoreToAllOfThem) {
  EXPECT_DOUBLE_EQ(cpu_copy_share(0, 2), 0.5);
  EXPECT_DOUBLE_EQ(cpu_copy_share(1.5, 4), 0.375);
  EXPECT_DOUBLE_EQ(cpu_copy_share(34, 2), 1.0);
  EXPECT_DOUBLE_EQ(cpu_copy_share(3, 0), 0.0);
}

// The history moves only when the activations cannot fit the run alone, and only on a budget of
// one device: in RAM its pinned copy costs what it saves.
TEST(OffloadBudget, HistoryGoesToTheHostOnlyWhenActivationsAreNotEnough) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  const auto estimate = [&](const ActivationMemoryPlan& activations) {
    return estimate_memory(model, "fashion_cnn", 4, 4, 1, SyncKind::Local, 2, nullptr, "",
                           activations);
  };
  const MemoryEstimate whole = estimate({});
  const int64_t need = needed_bytes(whole, DeviceKind::Cpu, 0, BudgetScope::Device);
  const FittedMemory by_activations =
      fit_offload(estimate, DeviceKind::Cpu, 0, need - 4096, BudgetScope::Device);
  EXPECT_FALSE(by_activations.estimate.history_on_host());
  EXPECT_LE(needed_bytes(by_activations.estimate, DeviceKind::Cpu, 0, BudgetScope::Device),
            need - 4096);

  const int64_t tight = need - whole.history / 2;  // more than all the activations
  const FittedMemory moved = fit_offload(estimate, DeviceKind::Cpu, 0, tight, BudgetScope::Device);
  ASSERT_TRUE(moved.estimate.history_on_host());
  EXPECT_EQ(moved.estimate.history_host, whole.history);
  EXPECT_EQ(moved.estimate.history, history_stage_bytes(model_learnable(whole), 2, sizeof(float)));
  EXPECT_LE(needed_bytes(moved.estimate, DeviceKind::Cpu, 0, BudgetScope::Device), tight);
  EXPECT_GE(moved.estimate.pinned, whole.history);
  EXPECT_NE(describe_offload(moved.estimate).find("the solver's history ("), std::string::npos);

  const FittedMemory in_ram =
      fit_offload(estimate, DeviceKind::Cpu, 0, tight, BudgetScope::WholeRun);
  EXPECT_FALSE(in_ram.estimate.history_on_host());
}

// Four convolutions whose outputs wait for backward, then a small fully-connected head: the
// momentum is smaller than any activation.
const char* kConvChainNet = R"(name: "ConvChain"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 64 dim: 3 dim: 24 dim: 24 } shape { dim: 64 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "conv3" type: "Convolution" bottom: "conv2" top: "conv3"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "conv3" top: "conv3" }
layer { name: "conv4" type: "Convolution" bottom: "conv3" top: "conv4"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu4" type: "ReLU" bottom: "conv4" top: "conv4" }
layer { name: "fc5" type: "InnerProduct" bottom: "conv4" top: "fc5"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "fc6" type: "InnerProduct" bottom: "fc5" top: "fc6"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc6" bottom: "label" top: "loss" }
)";

// With a profile the cheaper plan wins even when the activations alone would fit: the chain
// above, in what it needs with its momentum (173 KiB) staged from the host and every activation
// on the device, offloads an activation (its input, 432 KiB) instead when it has no profile; with
// layers of 5 us and links of 1 GB/s, behind which no copy hides, staging the momentum costs less.
TEST(OffloadBudget, WithAProfileTheCheaperPlanWins) {
  Profile profile =
      read_profile(cat(testing::source_dir(), "/docs/examples/profile_alexnet_h200.json"));
  profile.d2h = profile.h2d = {1, 1};  // 1 GB/s, 1 us a copy
  profile.layers.clear();
  for (const char* name : {"conv1", "relu1", "conv2", "relu2", "conv3", "relu3", "conv4", "relu4",
                           "fc5", "fc6", "loss"})
    profile.layers.push_back({name, "", 5, 5, 0});
  testing::TempDir dir;
  const std::string path = (dir / "chain.prototxt").string();
  std::ofstream(path) << kConvChainNet;
  const proto::NetParameter model = load_model(path);
  const auto estimate = [&](const ActivationMemoryPlan& activations) {
    return estimate_memory(model, path, 64, 64, 1, SyncKind::Cgdp, 1, nullptr, "", activations);
  };
  ActivationMemoryPlan planned;
  planned.memory = ActivationMemory::Planned;
  MemoryEstimate staged = estimate(planned);
  put_history_on_host(staged);
  const int64_t budget = needed_bytes(staged, DeviceKind::Cpu, 0, BudgetScope::Device);
  const FittedMemory plain = fit_offload(estimate, DeviceKind::Cpu, 0, budget, BudgetScope::Device);
  ASSERT_FALSE(plain.estimate.history_on_host());  // without a profile: activations first
  ASSERT_GT(plain.estimate.offload_each_way, 0);
  ASSERT_LE(needed_bytes(plain.estimate, DeviceKind::Cpu, 0, BudgetScope::Device), budget);
  const FittedMemory chosen =
      fit_offload(estimate, DeviceKind::Cpu, 0, budget, BudgetScope::Device, &profile);
  ASSERT_TRUE(chosen.estimate.history_on_host());
  EXPECT_LE(needed_bytes(chosen.estimate, DeviceKind::Cpu, 0, BudgetScope::Device), budget);
  EXPECT_LT(chosen.estimate.offload_each_way, plain.estimate.offload_each_way);
  EXPECT_LT(predict_offload(chosen.estimate, profile).slowdown(),
            predict_offload(plain.estimate, profile).slowdown());
}

// Ten pieces in on a link twice slower than the one out: the copies in, then the last piece out.
TEST(OffloadCost, HistoryStagingIsTheSlowerLinkPlusOnePiece) {
  EXPECT_DOUBLE_EQ(history_staging_us(10'000'000, 1'000'000, {1, 0}, {2, 0}), 10'000 + 500);
  EXPECT_DOUBLE_EQ(history_staging_us(10'000'000, 1'000'000, {2, 0}, {1, 0}), 500 + 10'000);
  EXPECT_DOUBLE_EQ(history_staging_us(10'000'000, 1'000'000, {1, 3}, {2, 0}), 10'000 + 30 + 500);
  EXPECT_DOUBLE_EQ(history_staging_us(0, 1'000'000, {1, 0}, {1, 0}), 0.0);
}

// A streamed weight's passes: 5 copies in, 2 out (forward; backward's weight and gradient; the
// update's weight and gradient in, weight out), and in bf16 one narrowing more, priced as a copy
// in.
TEST(OffloadCost, StreamedWeightsAreSevenCopiesAndBf16NarrowsOnceMore) {
  EXPECT_DOUBLE_EQ(streamed_weights_us(1'000'000, {1, 0}, {2, 0}), 5 * 1'000 + 2 * 500);
  EXPECT_DOUBLE_EQ(streamed_weights_us(1'000'000, {1, 0}, {2, 0}, 1), 6 * 1'000 + 2 * 500);
  EXPECT_DOUBLE_EQ(streamed_weights_us(0, {1, 0}, {2, 0}, 1), 0.0);
}

// `inspect --memory --device-memory-gb` shows the plan train makes, and says when even it does
// not fit.
TEST(OffloadBudget, InspectShowsThePlan) {
  const std::string bin =
      cat(testing::binary_dir(), "/cgdp inspect --memory --model resnet_small --batch 4 ");
  const MemoryEstimate m = estimate_memory(load_model(find_model_file("resnet_small")),
                                           "resnet_small", 4, 4, 1, SyncKind::Local);
  const double gb = 0.75 * static_cast<double>(m.worker_bytes(0)) / (1 << 30);
  const testing::CommandResult fits =
      testing::run_command(cat(bin, "--device-memory-gb ", gb, " 2>&1"));
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_NE(fits.output.find("plan: activations planned by liveness in a "), std::string::npos)
      << fits.output;
  EXPECT_NE(fits.output.find("fits: worker 0 needs "), std::string::npos) << fits.output;
  const testing::CommandResult history = testing::run_command(
      cat(testing::binary_dir(),
          "/cgdp inspect --memory --model fashion_cnn --batch 4 --device-memory-gb 0.009 2>&1"));
  EXPECT_EQ(history.exit_code, 0) << history.output;
  EXPECT_NE(history.output.find("momentum's device stage"), std::string::npos) << history.output;
  EXPECT_NE(history.output.find("the solver's history ("), std::string::npos) << history.output;
  const testing::CommandResult short_of =
      testing::run_command(bin + "--device-memory-gb 0.001 2>&1");
  EXPECT_EQ(short_of.exit_code, 1) << short_of.output;
  EXPECT_NE(short_of.output.find("does not fit: worker 0 needs "), std::string::npos)
      << short_of.output;
}

// `predict --device-memory-gb` gives train's plan with the profile's links: the H200's ResNet-152
// profile at 2.24 GB offloads some activations and predicts the copies' cost; Adam's two
// histories leave less room, so its plan moves more.
TEST(OffloadBudget, PredictShowsThePlanAndItsCost) {
  const auto offload_of = [](const std::string& solver) {
    const testing::CommandResult r = testing::run_command(
        cat(testing::binary_dir(), "/cgdp predict --profile ", testing::source_dir(),
            "/docs/examples/profile_resnet152_h200.json --model resnet152 --device-memory-gb 2.24 "
            "--json --solver-type ",
            solver, " 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output).at("offload") : nlohmann::json{};
  };
  const nlohmann::json offload = offload_of("SGD");
  ASSERT_FALSE(offload.is_null());
  EXPECT_TRUE(offload.at("fits").get<bool>()) << offload;
  EXPECT_GT(offload.at("offloaded").get<int>(), 0) << offload;
  EXPECT_GT(offload.at("bytes_each_way_per_worker").get<int64_t>(), 0) << offload;
  EXPECT_GT(offload.at("pass_us").get<double>(), offload.at("pass_without_copies_us").get<double>())
      << offload;
  const nlohmann::json adam = offload_of("Adam");
  ASSERT_FALSE(adam.is_null());
  const auto moved = [](const nlohmann::json& o) {
    return o.at("bytes_each_way_per_worker").get<int64_t>() +
           o.at("history_host_bytes_per_worker").get<int64_t>();
  };
  EXPECT_GT(moved(adam), moved(offload)) << adam << "\n" << offload;
}

}  // namespace
}  // namespace cgdp
