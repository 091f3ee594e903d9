// Cost inputs from a profile, and the time of each elementary step under the sharing model.
#include "cgdp/cost/cost_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/host_aggregator.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {

namespace {

double transfer_us(int64_t bytes, double gbps) {
  return static_cast<double>(bytes) / (gbps * 1e3);
}

// The host sum bandwidth for `devices` inputs: the entry with the nearest number of inputs, its
// time scaled linearly with the inputs (each input is read once).
double host_sum_for(const Profile& profile, int devices) {
  CGDP_ASSERT(!profile.host_sum.empty());
  const HostSumCost* nearest = &profile.host_sum.front();
  for (const HostSumCost& s : profile.host_sum)
    if (std::abs(s.inputs - devices) < std::abs(nearest->inputs - devices)) nearest = &s;
  return nearest->gbps * nearest->inputs / devices;
}

// What-if values a machine can have; past them the event simulation would not end (a link of
// 1e-300 GB/s, a million workers).
constexpr double kMinRate = 1e-3, kMaxRate = 1e6;  // GB/s (the network: Gbit/s)
constexpr double kMaxFactor = 1e6;                 // stretch, contention, latency in us / 1e3
constexpr int kMaxCount = 4096;                    // workers, hosts, threads, cores
constexpr int kMaxBatch = 1 << 24;

void check_what_if(const WhatIf& w) {
  const auto rate = [](const std::optional<double>& v, const char* name) {
    if (v && !(*v >= kMinRate && *v <= kMaxRate))
      throw UsageError(cat(name, ": expected a bandwidth from ", kMinRate, " to ", kMaxRate,
                           ", got ", *v));
  };
  const auto within = [](const std::optional<double>& v, double min, double max,
                         const char* name) {
    if (v && !(*v >= min && *v <= max))
      throw UsageError(cat(name, ": expected a number from ", min, " to ", max, ", got ", *v));
  };
  const auto count = [](const std::optional<int>& v, int min, int max, const char* name) {
    if (v && (*v < min || *v > max))
      throw UsageError(cat(name, ": expected an integer from ", min, " to ", max, ", got ", *v));
  };
  rate(w.d2h_gbps, "--d2h-gbps");
  rate(w.h2d_gbps, "--h2d-gbps");
  rate(w.p2p_gbps, "--p2p-gbps");
  if (w.host_memory_gbps && *w.host_memory_gbps != 0)  // 0: copies do not share
    rate(w.host_memory_gbps, "--host-memory-gbps");
  count(w.shared_cores, 0, kMaxCount, "--shared-cores");
  within(w.contention_factor, 0, kMaxFactor, "--contention-factor");
  within(w.exchange_stretch, 1, kMaxFactor, "--exchange-stretch");
  count(w.host_threads, 1, kMaxCount, "--host-threads");
  count(w.sum_lanes, 1, kMaxCount, "--sum-lanes");
  count(w.chunk_piece_kb, 0, 1 << 20, "--chunk-piece-kb");
  count(w.batch, 1, kMaxBatch, "--batch");
  count(w.hosts, 1, kMaxCount, "--hosts");
  rate(w.network_gbps, "--network-gbps");
  within(w.network_latency_us, 0, kMaxFactor * 1e3, "--network-latency-us");
}

// Host summing bandwidth for `inputs` buffers, with the what-if host threads and memory cap.
double sum_gbps(const Profile& profile, int inputs, const WhatIf& w, double host_memory_gbps) {
  const double measured = host_sum_for(profile, inputs);
  double gbps = measured * w.host_threads.value_or(profile.host_threads) / profile.host_threads;
  if (host_memory_gbps > 0)  // more threads cannot read the inputs faster than memory allows
    gbps = std::min(gbps, std::max(measured, host_memory_gbps / (inputs + 1)));
  return gbps;
}

// The network between hosts: flags over the profile's `network`; a bandwidth is needed for H > 1.
void set_network(CostInputs& in, const Profile& profile, const WhatIf& w) {
  in.hosts = w.hosts.value_or(1);
  const NetworkCost measured = profile.network.value_or(NetworkCost{});
  in.network = {w.network_gbps.value_or(measured.gbps),
                w.network_latency_us.value_or(measured.latency_us)};
  if (in.hosts > 1 && !(in.network.gbps > 0))
    throw UsageError(cat("--hosts ", in.hosts,
                         " needs the network's bandwidth: give --network-gbps",
                         " or the profile's network.gbit_per_s (", profile.source, ")"));
  in.shard_sum_gbps = sum_gbps(profile, in.hosts, w, in.host_memory_gbps);
}

// Param layers with their share of the backward pass; the profile's layers are in forward order.
void fill_params(CostInputs& in, const Profile& profile, std::span<const ParamLayer> params,
                 double scale) {
  size_t above = profile.layers.size();  // first layer not yet counted, going backward
  for (const ParamLayer& p : params) {
    const auto layer = static_cast<size_t>(p.layer);
    if (layer >= above || profile.layers[layer].name != p.name)
      throw DataError(cat(profile.source, ": does not match the model: no layer '", p.name,
                          "' at index ", p.layer));
    ParamCost cost{p, 0};
    for (size_t i = layer; i < above; ++i)
      cost.backward_us += profile.layers[i].backward_us * scale;
    cost.own_backward_us = profile.layers[layer].backward_us * scale;
    in.params.push_back(cost);
    above = layer;
  }
  for (size_t i = 0; i < above; ++i) in.tail_backward_us += profile.layers[i].backward_us * scale;
}

}  // namespace

double CostInputs::backward_total_us() const {
  double total = tail_backward_us;
  for (const ParamCost& p : params) total += p.backward_us;
  return total;
}

int64_t CostInputs::param_bytes() const {
  int64_t total = 0;
  for (const ParamCost& p : params) total += p.bytes();
  return total;
}

int64_t CostInputs::summed_bytes(int first, int last) const {
  int64_t total = 0;
  for (int i = first; i <= last; ++i) total += params[i].summed_bytes();
  return total;
}

void set_exchange_dtype(CostInputs& in, const Profile& profile, ExchangeDtype dtype) {
  in.element_bytes = element_bytes(dtype);
  in.rebuild_speedup = dtype == ExchangeDtype::Bf16 ? profile.rebuild_bf16_speedup : 1;
}

CostInputs make_cost_inputs(const Profile& profile, std::span<const ParamLayer> params, int devices,
                            const WhatIf& what_if) {
  check_what_if(what_if);
  if (devices < 1 || devices > kMaxCount)
    throw UsageError(
        cat("--devices: expected an integer from 1 to ", kMaxCount, ", got ", devices));
  CostInputs in;
  in.devices = devices;
  in.batch = what_if.batch.value_or(profile.batch);
  const double scale = static_cast<double>(in.batch) / profile.batch;
  for (const LayerCost& l : profile.layers) in.forward_us += l.forward_us * scale;
  fill_params(in, profile, params, scale);
  in.d2h = {what_if.d2h_gbps.value_or(profile.d2h.gbps), profile.d2h.latency_us};
  in.h2d = {what_if.h2d_gbps.value_or(profile.h2d.gbps), profile.h2d.latency_us};
  in.p2p = {what_if.p2p_gbps.value_or(profile.p2p.gbps), profile.p2p.latency_us};
  in.host_memory_gbps = what_if.host_memory_gbps.value_or(profile.host_memory_gbps);
  in.p2p_shares_host_memory = profile.backend == "cpu";
  in.sync_us = profile.sync_us;
  in.overlap_us_per_mb = profile.overlap_us_per_mb;
  in.host_sum_gbps = sum_gbps(profile, devices, what_if, in.host_memory_gbps);
  in.shared_cores = what_if.shared_cores.value_or(profile.shared_cores);
  in.contention_factor = what_if.contention_factor.value_or(profile.contention_factor);
  in.exchange_stretch = what_if.exchange_stretch.value_or(profile.exchange_stretch);
  in.host_threads = what_if.host_threads.value_or(profile.host_threads);
  in.sum_lanes = what_if.sum_lanes.value_or(1);
  if (in.sum_lanes > kMaxSumLanes)
    throw UsageError(
        cat("--sum-lanes: expected an integer <= ", kMaxSumLanes, ", got ", in.sum_lanes));
  if (in.sum_lanes > in.host_threads)
    throw UsageError(cat("--sum-lanes ", in.sum_lanes, ": expected at most the host threads (",
                         in.host_threads, "), as each lane sums on one or more of them"));
  set_network(in, profile, what_if);
  in.piece_bytes = int64_t{what_if.chunk_piece_kb.value_or(0)} * 1024;
  if (in.piece_bytes > 0 && in.hosts > 1)
    throw UsageError("--chunk-piece-kb: across hosts the chunks go whole, for now");
  in.update_gbps = profile.update_gbps;
  in.device_sum_gbps = profile.device_sum_gbps;
  return in;
}

double copy_us(const LinkCost& link, int64_t bytes, int at_once, double pool_gbps) {
  CGDP_ASSERT(at_once >= 1 && link.gbps > 0);
  const double rate = pool_gbps > 0 ? std::min(link.gbps, pool_gbps / at_once) : link.gbps;
  return link.latency_us + transfer_us(bytes, rate);
}

double d2h_us(const CostInputs& in, int64_t bytes) {
  return copy_us(in.d2h, bytes, in.devices, in.host_memory_gbps);
}

double h2d_us(const CostInputs& in, int64_t bytes) {
  return copy_us(in.h2d, bytes, in.devices, in.host_memory_gbps);
}

int host_sum_team(const CostInputs& in, int64_t bytes) {
  return sum_team(bytes / 4, in.lane_threads());
}

double host_sum_us(const CostInputs& in, int64_t bytes) {
  return transfer_us(bytes, in.host_sum_gbps * host_sum_team(in, bytes) / in.host_threads);
}

double p2p_us(const CostInputs& in, int64_t bytes, int at_once) {
  return copy_us(in.p2p, bytes, at_once, in.p2p_shares_host_memory ? in.host_memory_gbps : 0);
}

double device_sum_us(const CostInputs& in, int64_t bytes) {
  return transfer_us(bytes, in.device_sum_gbps);
}

double update_us(const CostInputs& in) {
  return transfer_us(in.param_bytes(), in.update_gbps);
}

}  // namespace cgdp
