// `cgdp predict`: per-layer costs of a profile against a model, the predicted iteration of cgdp
// (a given chunk plan) and ps0 by the event simulation and the paper's formulas, and the best
// chunk plan; as a table or JSON. What-if flags change the machine the profile describes; --hosts
// predicts a run over several hosts (each chunk gains a network stage; ps0 is not predicted).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cgdp/core/fixed.hpp"
#include "cgdp/cost/fc_exchange.hpp"
#include "cgdp/cost/formulas.hpp"
#include "cgdp/cost/loader_stage.hpp"
#include "cgdp/cost/plan_search.hpp"
#include "cgdp/cost/profile_match.hpp"
#include "cgdp/cost/simulator.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/update_rule.hpp"
#include "cgdp/train/memory_estimate.hpp"
#include "cgdp/train/train_config.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

namespace {

using Json = nlohmann::ordered_json;

struct PredictOptions {
  std::string model;  // empty: the profile's
  std::string profile;
  int devices = 0;  // 0: the profile's
  std::string chunk;  // empty: what train takes on the profile's backend
  bool formula = false;
  bool json = false;
  int loader_threads = 0;  // 0: the profile's
  std::string sync;        // "cgdp": one worker exchanges anyway; empty: as train (local)
  std::string fc_exchange = "auto";
  std::string exchange_dtype = "fp32";
  double device_memory_gb = 0;  // > 0: plan the activations to fit it (train's --offload auto)
  std::string solver_type = "SGD";  // its histories, which the plan may stage on the host
  WhatIf what_if;
};

// What train --offload auto plans for a device of --device-memory-gb, and what its copies cost.
struct OffloadPrediction {
  MemoryEstimate memory;
  bool fits = false;
  OffloadPassCost pass;  // one micro-batch's forward and backward, with and without the copies
};

struct Prediction {
  Profile profile;
  std::string model;  // the model file predicted for
  std::vector<ParamLayer> params;
  CostInputs inputs;  // cgdp's, with the factored weights applied
  std::vector<bool> factored;
  LinkBytes bytes, dense_bytes;  // cgdp per worker and iteration, as chosen and all dense
  double single_worker_us = 0;  // one worker training local: T(1) of weak scaling
  std::string chunk;  // --chunk, or train's default for the profile's backend
  ChunkPlan plan;
  IterationPrediction cgdp, ps0;
  FormulaPrediction cgdp_formula, ps0_formula;
  PlanSearchResult search;
  std::optional<LoaderPrediction> loader;  // when the profile measured the loader
  std::optional<OffloadPrediction> offload;  // with --device-memory-gb, when the run needs a plan
  // ps0 runs on one host only: `cgdp train --sync ps0 --hosts` is refused (trainer.cpp).
  bool has_ps0() const { return inputs.hosts == 1; }
};

constexpr const char* kNoPs0 = "not predicted: --hosts needs --sync cgdp (cgdp train refuses ps0)";

double ms(double us) {
  return us / 1e3;
}

// The plan search pipelines the summed chunks only: with weights sent as factors beside them,
// its plans' times come from the event simulation instead (and the best is best among dense
// pipelines, not necessarily overall).
void resimulate(PlanSearchResult& search, const CostInputs& in) {
  const auto again = [&](PlanChoice& c) {
    const IterationPrediction s = simulate_cgdp(in, c.plan);
    c.exchange_end_us = s.backward_us + s.exchange_after_backward_us;
    c.iteration_us = s.iteration_us;
  };
  again(search.best);
  again(search.best_equal_size);
  for (PlanChoice& c : search.equal_size) again(c);
}

// --model, or else the model the profile was measured on (a name from models/ or a path).
std::string model_of(const PredictOptions& opt, const Profile& profile) {
  if (!opt.model.empty()) return opt.model;
  if (profile.model.empty()) throw UsageError(cat(opt.profile, " names no model: give --model"));
  const std::string path = find_model_file(profile.model);
  if (!std::filesystem::exists(path))
    throw UsageError(cat(opt.profile, " was measured on model '", profile.model,
                         "', which is not here: give --model"));
  return path;
}

// The memory a run of `p`'s model at the profile's batch takes on one device of the budget, planned
// when it does not fit as it is: as train plans it on the profile's backend (on CUDA with cuDNN's
// default scratch cap and, in 16 bits, the operands' copies) for --solver-type's histories.
std::optional<OffloadPrediction> predict_offload_plan(const Prediction& p, const std::string& path,
                                                      const PredictOptions& opt) {
  const int64_t budget = static_cast<int64_t>(opt.device_memory_gb * (1LL << 30));
  const int64_t batch = opt.what_if.batch.value_or(p.profile.batch);
  const proto::NetParameter model = load_model(path);
  const Precision precision = parse_precision(p.profile.precision, "the profile's precision");
  const DeviceKind kind = p.profile.backend == "cuda" ? DeviceKind::Cuda : DeviceKind::Cpu;
  const int gpus = kind == DeviceKind::Cuda ? p.inputs.devices : 0;
  proto::SolverParameter solver;
  solver.set_type(opt.solver_type);
  const int histories = make_solver_settings(solver, "--solver-type").histories();
  const ScopedLayerPrecision layers_in(precision);  // as the profiled run's layers
  const auto estimate = [&](ActivationMemoryPlan activations) {
    activations.pack = packing_of("auto", kind);
    MemoryEstimate m = estimate_memory(model, path, batch, batch, p.inputs.devices, SyncKind::Cgdp,
                                       histories, nullptr, "", activations, kind);
    add_cuda_scratch(m, kind, TrainConfig{}.cudnn_workspace_mb, precision);
    return m;
  };
  const MemoryEstimate as_is = estimate(default_activation_memory(precision, "auto", kind));
  if (needed_bytes(as_is, kind, gpus, BudgetScope::Device) <= budget) return std::nullopt;
  OffloadPrediction o;
  o.memory = fit_offload(estimate, kind, gpus, budget, BudgetScope::Device, &p.profile).estimate;
  o.fits = needed_bytes(o.memory, kind, gpus, BudgetScope::Device) <= budget;
  o.pass = predict_offload(o.memory, p.profile);
  return o;
}

Prediction predict(const PredictOptions& opt) {
  Prediction p;
  p.profile = read_profile(opt.profile);
  p.model = model_of(opt, p.profile);
  const std::string path = find_model_file(p.model);
  MeasuringDevice shapes_only;  // the net's shapes: nothing is allocated or filled for real
  Net<float> net(load_model(path), Phase::Train, shapes_only, 1, 1, path);
  check_profile_matches(p.profile, net);
  p.params = param_layers(net);
  const CostInputs dense = make_cost_inputs(
      p.profile, p.params, opt.devices > 0 ? opt.devices : p.profile.devices, opt.what_if);
  p.inputs = dense;
  p.inputs.local_when_alone = opt.sync != "cgdp";
  p.chunk = opt.chunk.empty() ? default_chunk_spec(p.profile.backend == "cuda" ? DeviceKind::Cuda : DeviceKind::Cpu)
                              : opt.chunk;
  p.plan = make_chunk_plan(p.params, p.chunk);
  p.dense_bytes = exchange_bytes(p.inputs);  // all dense, fp32: what both options are set against
  set_exchange_dtype(p.inputs, p.profile, parse_exchange_dtype(opt.exchange_dtype));
  p.factored = choose_factored(p.inputs, p.plan, parse_fc_exchange(opt.fc_exchange));
  apply_factors(p.inputs, p.factored);
  p.bytes = exchange_bytes(p.inputs);
  p.cgdp = simulate_cgdp(p.inputs, p.plan);
  p.cgdp_formula = formula_cgdp(p.inputs, p.plan);
  if (p.has_ps0()) {  // ps0 sums dense gradients on the device
    p.ps0 = simulate_ps0(dense);
    p.ps0_formula = formula_ps0(dense);
  }
  if (opt.device_memory_gb > 0) p.offload = predict_offload_plan(p, path, opt);
  CostInputs alone = make_cost_inputs(p.profile, p.params, 1, opt.what_if);
  p.single_worker_us = simulate_cgdp(alone, p.plan).iteration_us;
  p.search = best_plan(p.inputs);
  if (std::count(p.factored.begin(), p.factored.end(), true) > 0) resimulate(p.search, p.inputs);
  if (opt.loader_threads > 0 && !p.profile.loader)
    throw UsageError(cat("--loader-threads: ", opt.profile, " has no loader rate (profile with image "
                         "data: --data folder:, list: or lmdb:)"));
  if (p.profile.loader) {
    const int64_t samples = static_cast<int64_t>(p.inputs.devices) * opt.what_if.batch.value_or(p.profile.batch);
    p.loader = predict_loader(*p.profile.loader, samples, p.cgdp.iteration_us,
                              opt.loader_threads > 0 ? opt.loader_threads : p.profile.loader->threads);
  }
  return p;
}

Json loader_json(const LoaderPrediction& l, const LoaderCost& cost) {
  return {{"images_per_s_per_thread", cost.images_per_s_per_thread},
          {"measured_on", cost.data},
          {"needed_images_per_s", l.needed_images_per_s},
          {"threads_needed", l.threads_needed},
          {"threads", l.threads},
          {"images_per_s", l.images_per_s},
          {"loader_bound", l.loader_bound},
          {"iteration_us", l.iteration_us}};
}

void print_loader(const LoaderPrediction& l, const LoaderCost& cost, double compute_us) {
  std::printf("loader: %.0f images/s per thread (measured on %s); the workers take %.0f images/s, "
              "which needs %d thread%s\n",
              cost.images_per_s_per_thread, cost.data.c_str(), l.needed_images_per_s,
              l.threads_needed, l.threads_needed == 1 ? "" : "s");
  if (l.loader_bound)
    std::printf("warning: loader-bound: %d loader thread%s decode %.0f images/s, so an iteration "
                "takes %.3f ms, not %.3f ms (give --loader-threads %d, or fewer decodes: "
                "smaller stored images, an LMDB of raw pixels)\n",
                l.threads, l.threads == 1 ? "" : "s", l.images_per_s, ms(l.iteration_us),
                ms(compute_us), l.threads_needed);
  else
    std::printf("  with %d thread%s it decodes %.0f images/s: it keeps up\n", l.threads,
                l.threads == 1 ? "" : "s", l.images_per_s);
}

// Chunk of each layer of the net (forward order), -1 for layers without parameters.
std::vector<int> chunk_of_layers(const Prediction& p) {
  std::vector<int> chunk(p.profile.layers.size(), -1);
  for (size_t c = 0; c < p.plan.chunks.size(); ++c)
    for (int i = p.plan.chunks[c].first; i <= p.plan.chunks[c].last; ++i)
      chunk[p.params[i].layer] = static_cast<int>(c);
  return chunk;
}

Json phases_json(const IterationPrediction& s) {
  return {{"forward_us", s.forward_us},
          {"backward_us", s.backward_us},
          {"exchange_after_backward_us", s.exchange_after_backward_us},
          {"update_us", s.update_us},
          {"broadcast_us", s.broadcast_us},
          {"sum_us", s.sum_us},
          {"iteration_us", s.iteration_us}};
}

Json formula_json(const FormulaPrediction& f) {
  return {{"t_bp_us", f.t_bp_us},
          {"backward_us", f.backward_us},
          {"overhead_us", f.overhead_us},
          {"overhead_approx_us", f.overhead_approx_us},
          {"iteration_us", f.iteration_us}};
}

// With T(1) of weak scaling (`single_worker_us`), the plan's T(1)/T(N).
Json choice_json(const PlanChoice& c, double single_worker_us) {
  return {{"chunk", c.spec},
          {"chunks", c.plan.chunks.size()},
          {"exchange_end_us", c.exchange_end_us},
          {"iteration_us", c.iteration_us},
          {"weak_scaling_efficiency", single_worker_us / c.iteration_us}};
}

// Stage `name`'s time in chunk `t` (0 when the chunk has no such stage).
double stage_time_us(const ChunkTiming& t, const std::string& name) {
  for (const StageSpan& s : t.stages)
    if (s.name == name) return s.end_us - s.start_us;
  return 0;
}

// A chunk's bytes that go through its stages: fp32, less its weights sent as factors.
int64_t chunk_bytes(const Prediction& p, size_t c) {
  return p.inputs.summed_bytes(p.plan.chunks[c].first, p.plan.chunks[c].last);
}

double landed_us(const ChunkTiming& t) {
  return t.stages.empty() ? t.ready_us : t.stages.back().end_us;
}

// With several hosts: each chunk's stages as simulated, and the network settings.
void add_hosts_json(Json& j, const Prediction& p) {
  j["network"] = {{"gbit_per_s", p.inputs.network.gbps},
                  {"latency_us", p.inputs.network.latency_us}};
  Json chunks = Json::array();
  for (size_t c = 0; c < p.cgdp.chunks.size(); ++c) {
    const ChunkTiming& t = p.cgdp.chunks[c];
    Json chunk = {{"chunk", c}, {"bytes", chunk_bytes(p, c)}, {"ready_us", t.ready_us}};
    for (const StageSpan& s : t.stages) chunk[s.name + "_us"] = s.end_us - s.start_us;
    chunk["landed_us"] = landed_us(t);
    chunks.push_back(chunk);
  }
  j["chunks"] = chunks;
}

Json factored_names(const Prediction& p) {
  Json names = Json::array();
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.factored[i]) names.push_back(p.params[i].name);
  return names;
}

Json to_json(const Prediction& p, const PredictOptions& opt) {
  Json layers = Json::array();
  const std::vector<int> chunk = chunk_of_layers(p);
  for (size_t i = 0; i < p.profile.layers.size(); ++i) {
    const LayerCost& l = p.profile.layers[i];
    layers.push_back({{"name", l.name},
                      {"type", l.type},
                      {"forward_us", l.forward_us},
                      {"backward_us", l.backward_us},
                      {"param_bytes", l.param_bytes},
                      {"chunk", chunk[i] < 0 ? Json() : Json(chunk[i])}});
  }
  Json equal = Json::array();
  for (const PlanChoice& c : p.search.equal_size)
    equal.push_back(choice_json(c, p.single_worker_us));
  Json j = {{"model", p.model},
            {"profile", opt.profile},
            {"devices", p.inputs.devices},
            {"hosts", p.inputs.hosts},
            {"chunk", p.chunk},
            {"layers", layers},
            {"cgdp",
             {{"simulated", phases_json(p.cgdp)},
              {"formula", formula_json(p.cgdp_formula)},
              {"fc_exchange", opt.fc_exchange},
              {"exchange_dtype", opt.exchange_dtype},
              {"factored_layers", factored_names(p)},
              {"d2h_bytes_per_worker", p.bytes.d2h},
              {"h2d_bytes_per_worker", p.bytes.h2d},
              {"dense_d2h_bytes_per_worker", p.dense_bytes.d2h},
              {"dense_h2d_bytes_per_worker", p.dense_bytes.h2d},
              {"single_worker_iteration_us", p.single_worker_us},
              {"weak_scaling_efficiency", p.single_worker_us / p.cgdp.iteration_us}}},
            {"ps0", p.has_ps0() ? Json{{"simulated", phases_json(p.ps0)},
                                       {"formula", formula_json(p.ps0_formula)}}
                                : Json{{"error", kNoPs0}}},
            {"best", choice_json(p.search.best, p.single_worker_us)},
            {"best_equal_size", choice_json(p.search.best_equal_size, p.single_worker_us)},
            {"equal_size", equal}};
  if (!p.has_ps0()) add_hosts_json(j, p);
  if (p.loader) j["loader"] = loader_json(*p.loader, *p.profile.loader);
  if (p.offload)
    j["offload"] = {{"fits", p.offload->fits},
                    {"arena_bytes", p.offload->memory.arena},
                    {"activations", p.offload->memory.planned_units},
                    {"offloaded", p.offload->memory.offloaded},
                    {"bytes_each_way_per_worker", p.offload->memory.offload_each_way},
                    {"history_host_bytes_per_worker", p.offload->memory.history_host},
                    {"history_staging_us", p.offload->pass.history_us},
                    {"streamed_weights", p.offload->memory.streamed_layers},
                    {"streamed_bytes_per_worker", p.offload->memory.streamed},
                    {"streamed_us", p.offload->pass.streamed_us},
                    {"pass_us", p.offload->pass.pass_us},
                    {"pass_without_copies_us", p.offload->pass.compute_us},
                    {"slowdown", p.offload->pass.slowdown()}};
  return j;
}

void print_layers(const Prediction& p) {
  std::printf("%-28s %12s %12s %14s %6s\n", "layer", "forward ms", "backward ms", "param bytes",
              "chunk");
  const std::vector<int> chunk = chunk_of_layers(p);
  for (size_t i = 0; i < p.profile.layers.size(); ++i) {
    const LayerCost& l = p.profile.layers[i];
    const std::string c = chunk[i] < 0 ? "-" : std::to_string(chunk[i]);
    std::printf("%-28s %12.3f %12.3f %14lld %6s\n", l.name.c_str(), ms(l.forward_us),
                ms(l.backward_us), static_cast<long long>(l.param_bytes), c.c_str());
  }
}

// With several hosts: each chunk's stages as simulated (ms), the network's among them.
void print_chunks(const Prediction& p) {
  std::printf("network: %d hosts, %g Gbit/s, %g us per message; per chunk (simulated, ms):\n",
              p.inputs.hosts, p.inputs.network.gbps, p.inputs.network.latency_us);
  std::printf("  %5s %14s %9s %9s %9s %9s %9s %9s\n", "chunk", "bytes", "ready", "d2h", "sum",
              "network", "h2d", "landed");
  for (size_t c = 0; c < p.cgdp.chunks.size(); ++c) {
    const ChunkTiming& t = p.cgdp.chunks[c];
    std::printf("  %5zu %14lld %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", c,
                static_cast<long long>(chunk_bytes(p, c)), ms(t.ready_us),
                ms(stage_time_us(t, "d2h")), ms(stage_time_us(t, "sum")),
                ms(stage_time_us(t, "network")), ms(stage_time_us(t, "h2d")), ms(landed_us(t)));
  }
}

void print_row(const std::string& what, const IterationPrediction& s) {
  std::printf("  %-32s %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f\n", what.c_str(), ms(s.forward_us),
              ms(s.backward_us), ms(s.exchange_after_backward_us), ms(s.update_us),
              ms(s.broadcast_us), ms(s.iteration_us));
}

void print_formulas(const Prediction& p, const std::string& cgdp_name) {
  std::printf("paper's formulas (ms): backward T, overhead T_O = T - T_BP, iteration\n");
  const FormulaPrediction& c = p.cgdp_formula;
  const FormulaPrediction& s = p.ps0_formula;
  std::printf("  %-32s T  %9.3f  T_O  %9.3f (approx. %.3f)  iteration %10.3f\n", cgdp_name.c_str(),
              ms(c.backward_us), ms(c.overhead_us), ms(c.overhead_approx_us), ms(c.iteration_us));
  if (!p.has_ps0()) {
    std::printf("  %-32s %s\n", "ps0", kNoPs0);
    return;
  }
  std::printf("  %-32s T' %9.3f  T'_O %9.3f                  iteration %10.3f\n", "ps0",
              ms(s.backward_us), ms(s.overhead_us), ms(s.iteration_us));
}

void print_report(const Prediction& p, const PredictOptions& opt) {
  const Profile& prof = p.profile;
  std::printf("cgdp predict: %s with %s (%s, %s%s; %d workers, batch %d per worker)\n",
              p.model.c_str(), opt.profile.c_str(), prof.backend.c_str(), prof.device.c_str(),
              prof.precision == "fp32" ? "" : cat(", layers in ", prof.precision).c_str(),
              p.inputs.devices, opt.what_if.batch.value_or(prof.batch));
  if (p.inputs.shared_cores > 0)
    std::printf(
        "the exchange shares %d cores with the backward (contention factor %.2f, "
        "exchange stretch %.2f)\n",
        p.inputs.shared_cores, p.inputs.contention_factor, p.inputs.exchange_stretch);
  if (p.inputs.piece_bytes > 0)
    std::printf("chunks travel in pieces of %lld KiB\n",
                static_cast<long long>(p.inputs.piece_bytes / 1024));
  if (p.inputs.sum_lanes > 1)
    std::printf("the host sums %d chunks at once, %d threads each\n", p.inputs.sum_lanes,
                p.inputs.lane_threads());
  print_layers(p);
  std::printf("plan --chunk %s: %s\n", p.chunk.c_str(), describe(p.plan, p.params).c_str());
  std::printf("fully-connected exchange (--fc-exchange %s, --exchange-dtype %s): %s; per worker "
              "and iteration %.2f MB to the host, %.2f MB back (all dense fp32: %.2f MB each "
              "way)\n",
              opt.fc_exchange.c_str(), opt.exchange_dtype.c_str(),
              describe_factored(p.params, p.factored).c_str(), p.bytes.d2h / 1e6,
              p.bytes.h2d / 1e6, p.dense_bytes.d2h / 1e6);
  std::printf("simulated (ms)                     %9s %9s %9s %9s %9s %10s\n", "forward",
              "backward", "exchange", "update", "broadcast", "iteration");
  const std::string cgdp_name = "cgdp --chunk " + p.chunk;
  print_row(cgdp_name, p.cgdp);
  if (p.has_ps0()) {
    print_row("ps0", p.ps0);
  } else {
    std::printf("  %-32s %s\n", "ps0", kNoPs0);
    print_chunks(p);
  }
  if (p.inputs.devices > 1)
    std::printf("weak scaling: one worker %.3f ms, %d workers %.3f ms: efficiency T(1)/T(%d) = "
                "%.3f\n",
                ms(p.single_worker_us), p.inputs.devices, ms(p.cgdp.iteration_us),
                p.inputs.devices, p.single_worker_us / p.cgdp.iteration_us);
  if (opt.formula) print_formulas(p, cgdp_name);
  const PlanChoice& best = p.search.best;
  const PlanChoice& equal = p.search.best_equal_size;
  // With several workers, each plan's weak-scaling efficiency beside its time.
  auto efficiency = [&](const PlanChoice& c) {
    return p.inputs.devices > 1 ? cat(", T(1)/T(", p.inputs.devices,
                                      ") = ", fixed(p.single_worker_us / c.iteration_us, 3))
                                : std::string();
  };
  std::printf("best plan (%s): --chunk %s  %.3f ms per iteration%s (%s)\n",
              p.search.exact ? "exact search" : "search cut to its most promising states",
              best.spec.c_str(), ms(best.iteration_us), efficiency(best).c_str(),
              describe(best.plan, p.params).c_str());
  std::printf("best equal-size plan (paper, K = 1..%d): --chunk %s  %.3f ms per iteration%s\n",
              p.inputs.num_params(), equal.spec.c_str(), ms(equal.iteration_us),
              efficiency(equal).c_str());
  if (p.loader) print_loader(*p.loader, *p.profile.loader, p.cgdp.iteration_us);
  if (opt.device_memory_gb > 0 && !p.offload)
    std::printf("offload: the run fits --device-memory-gb %g as it is\n", opt.device_memory_gb);
  if (p.offload) {
    const OffloadPrediction& o = *p.offload;
    std::printf(
        "offload (--device-memory-gb %g): %s; %s; forward and backward %.3f ms, %.3f ms "
        "with the copies, %.3f ms staging the history, %.3f ms streaming weights (%+.1f%%)\n",
        opt.device_memory_gb, describe_offload(o.memory).c_str(),
        o.fits ? "fits" : "does NOT fit even so", ms(o.pass.compute_us), ms(o.pass.pass_us),
        ms(o.pass.history_us), ms(o.pass.streamed_us), 100 * o.pass.slowdown());
  }
}

}  // namespace

Runner add_predict_command(CLI::App& app) {
  auto opt = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict iteration times from a machine profile");
  cmd->add_option("-m,--model", opt->model,
                  "Model file, or a name from models/ (default: the one the profile names)");
  cmd->add_option("-p,--profile", opt->profile, "Profile JSON (cgdp profile, docs/profile.md)")
      ->required();
  cmd->add_option("-n,--devices", opt->devices, "Workers (default: the profile's)")
      ->check(kPositive);
  cmd->add_option("--chunk", opt->chunk,
                  cat("cgdp chunk plan: layer, K, bytes:MB, all, or b1,b2,... (default: train's on the "
                      "profile's backend: layer on cpu, bytes:", kDefaultCudaChunkMiB, " on cuda)"));
  cmd->add_option("--sync", opt->sync,
                  "cgdp: one worker runs cgdp's exchange too, as train --sync cgdp (default: as "
                  "train, one worker trains local, with no exchange)")
      ->check(CLI::IsMember({"cgdp", "local"}));
  cmd->add_option("--fc-exchange", opt->fc_exchange,
                  "cgdp: InnerProduct weights dense, as sufficient factors, or auto (the cost "
                  "model picks per layer)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "dense", "factors"}));
  cmd->add_option("--exchange-dtype", opt->exchange_dtype,
                  "cgdp: what summed chunks and factors travel as: fp32, bf16 or fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_flag("--formula", opt->formula, "Also print the paper's closed-form predictions");
  cmd->add_flag("--json", opt->json, "Print JSON instead of tables");
  cmd->add_option("--device-memory-gb", opt->device_memory_gb,
                  "A device of this size: when the run does not fit, the activation plan train "
                  "--offload auto makes, the bytes it moves and what its copies cost a pass")
      ->check(kPositive);
  cmd->add_option("--solver-type", opt->solver_type,
                  "With --device-memory-gb: the solver, as train's (AdaDelta and Adam keep two "
                  "histories)")
      ->capture_default_str();
  cmd->add_option("--loader-threads", opt->loader_threads,
                  "What if: loader threads (default: the profile's); needs a profile with a loader")
      ->check(kPositive);
  WhatIf& w = opt->what_if;
  cmd->add_option("-b,--batch", w.batch, "What if: samples per worker (compute scales linearly)");
  cmd->add_option("--d2h-gbps", w.d2h_gbps, "What if: device-to-host bandwidth, GB/s");
  cmd->add_option("--h2d-gbps", w.h2d_gbps, "What if: host-to-device bandwidth, GB/s");
  cmd->add_option("--p2p-gbps", w.p2p_gbps, "What if: peer bandwidth (ps0), GB/s");
  cmd->add_option("--host-memory-gbps", w.host_memory_gbps,
                  "What if: bandwidth copies share, GB/s (0: none)");
  cmd->add_option("--host-threads,--host-cores", w.host_threads,
                  "What if: host summing threads (host sum scales)");
  cmd->add_option("--sum-lanes", w.sum_lanes,
                  "What if: chunks the host sums at once, each on host threads / lanes threads, "
                  "as train --sum-lanes (default 1)");
  cmd->add_option("--chunk-piece-kb", w.chunk_piece_kb,
                  "What if: chunks copied, summed and sent back in pieces of this many KiB, as "
                  "train --chunk-piece-kb (default 0: whole chunks)");
  cmd->add_option("--shared-cores", w.shared_cores,
                  "What if: cores the workers compute on that the copies and the host sum also "
                  "use, so they slow backward (CPU backend; 0: none; default: the profile's)");
  cmd->add_option("--exchange-stretch", w.exchange_stretch,
                  "What if: exchange stages beside the layers take this many times longer "
                  "(default: the profile's, 1 if it has none)");
  cmd->add_option("--contention-factor", w.contention_factor,
                  "What if: the exchange costs backward this many times its core time over the "
                  "shared cores (default: the profile's, 1 if it has none)");
  cmd->add_option("--hosts", w.hosts,
                  "Hosts of --devices workers each (cgdp over shards, docs/scale-out.md): each "
                  "chunk gains a network stage; ps0 is not predicted (default 1)");
  cmd->add_option(
      "--network-gbps", w.network_gbps,
      "Network link of each host, Gbit/s (bits; default: the profile's network.gbit_per_s)");
  cmd->add_option("--network-latency-us", w.network_latency_us,
                  "Network cost per message of <= 1 MiB, us (default: the profile's, else 0)");
  return [opt] {
    const Prediction p = predict(*opt);
    if (opt->json)
      std::cout << to_json(p, *opt).dump(2) << "\n";
    else
      print_report(p, *opt);
    return 0;
  };
}

}  // namespace cgdp::cli
