// How InnerProduct weights travel (--fc-exchange): as dense gradients the host sums, or as
// sufficient factors (layers/sufficient_factors.hpp) the host gathers and every worker turns back
// into the summed gradient with one GEMM. What each way moves, Poseidon's byte rule for a run
// without a profile, and the cost model's choice with one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

enum class FcExchange { Auto, Dense, Factors };

// "auto", "dense" or "factors"; UsageError naming --fc-exchange otherwise.
FcExchange parse_fc_exchange(const std::string& text);
const char* to_string(FcExchange mode);

// Bytes one worker copies to the host (d2h) and back (h2d) in one iteration.
struct LinkBytes {
  int64_t d2h = 0;
  int64_t h2d = 0;
};

// One worker's factor elements of param layer p for `samples` samples (batch times micro-batches).
int64_t factor_elements(const ParamLayer& p, int64_t samples);
// Param layer p's bytes per worker with `workers` workers: its gradient both ways, or, with its
// weight as factors, the rest of it both ways plus its factors up and all workers' factors down;
// `element_bytes` per element (4: fp32, 2: bf16 or fp16).
LinkBytes layer_bytes(const ParamLayer& p, bool factored, int64_t samples, int workers,
                      int element_bytes = 4);
// Poseidon's rule (its SACP, sec. 4.3) on cgdp's two links: factors when they move fewer bytes
// than the weight does.
bool factors_move_fewer_bytes(const ParamLayer& p, int64_t samples, int workers);
// The layers that send factors without a profile: none (dense), every factorable one (factors),
// or those Poseidon's rule picks (auto). One entry per param layer.
std::vector<bool> factored_by_bytes(std::span<const ParamLayer> params, FcExchange mode,
                                    int64_t samples, int workers);
// The choice without a cost model: factored_by_bytes on CUDA workers; on CPU ones auto keeps every
// weight dense, as a copy there is a memcpy and the rebuild's GEMM would take the layers' cores.
std::vector<bool> factored_without_model(std::span<const ParamLayer> params, FcExchange mode,
                                         DeviceKind kind, int64_t samples, int workers);

// A factored layer no longer computes its weight gradient: that GEMM is one of the two equal
// GEMMs of its backward (weight and input gradients), so half its own backward time.
double local_weight_gemm_us(const ParamCost& p);
// Every worker rebuilds the sum from all workers' rows (N per host, of every host): the same GEMM
// with N H times the rows, at in.rebuild_speedup times its speed.
double rebuild_us(const CostInputs& in, const ParamCost& p);
// Marks the layers in `factored` (one entry per param layer; only factorable ones may be set)
// and takes their weight GEMM off the backward.
void apply_factors(CostInputs& in, const std::vector<bool>& factored);
// The layers cgdp sends as factors under `mode`, by the cost model: auto tries each factorable
// layer, largest weight first, and keeps its factors when the simulated iteration with `plan` is
// faster. None without an exchange. Across hosts the rows are gathered through the shards.
std::vector<bool> choose_factored(const CostInputs& in, const ChunkPlan& plan, FcExchange mode);
// One worker's bytes per iteration with in's choices (cgdp; zero without an exchange); down, the
// factor rows of every host's workers.
LinkBytes exchange_bytes(const CostInputs& in);
// "fc6, fc7 as factors" or "none as factors", for the start of a run and predict.
std::string describe_factored(std::span<const ParamLayer> params,
                              const std::vector<bool>& factored);

}  // namespace cgdp
