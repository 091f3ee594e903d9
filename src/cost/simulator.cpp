// One iteration as tasks on simulated streams: cgdp's chunk pipeline and ps0's tree.
#include "cgdp/cost/simulator.hpp"

#include <algorithm>

#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/cost/event_sim.hpp"

namespace cgdp {

namespace {

// Streams of the cgdp simulation: per worker its compute stream and one per per-worker stage;
// one stream per host stage (the aggregator's sum lanes for the sum, the link for the network).
struct CgdpStreams {
  std::vector<int> compute;             // [worker]
  std::vector<std::vector<int>> stage;  // [stage][worker], one entry for a host stage
  std::vector<int> pool;                // [stage]: the sim's pool, or -1
};

CgdpStreams make_streams(EventSim& sim, const CostInputs& in,
                         const std::vector<StageCost>& stages) {
  CgdpStreams s;
  const int to_host = sim.add_pool(in.host_memory_gbps);
  const int from_host = sim.add_pool(in.host_memory_gbps);
  for (int w = 0; w < in.devices; ++w) s.compute.push_back(sim.add_stream());
  for (const StageCost& stage : stages) {
    s.stage.emplace_back();
    for (int w = 0; w < (stage.per_worker ? in.devices : 1); ++w)
      s.stage.back().push_back(sim.add_stream(stage.per_worker ? 1 : stage.lanes));
    s.pool.push_back(stage.pool == Pool::ToHost     ? to_host
                     : stage.pool == Pool::FromHost ? from_host
                                                    : -1);
  }
  return s;
}

// Adds chunk `c`'s stage tasks after its compute tasks `ready` (per worker); returns worker 0's
// task per stage.
std::vector<int> add_chunk_stages(EventSim& sim, const CgdpStreams& s,
                                  const std::vector<StageCost>& stages, std::vector<int> prev) {
  std::vector<int> worker0;
  for (size_t k = 0; k < stages.size(); ++k) {
    const StageCost& st = stages[k];
    EventSim::Task task{0, st.fixed_us, st.bytes, st.cap_gbps, s.pool[k], {}, 0};
    if (st.per_worker) {
      for (size_t w = 0; w < prev.size(); ++w) {
        task.stream = s.stage[k][w];
        task.deps = {prev[w]};
        prev[w] = sim.add(task);
      }
    } else {
      task.stream = s.stage[k][0];
      task.deps = prev;
      std::fill(prev.begin(), prev.end(), sim.add(task));
    }
    worker0.push_back(prev[0]);
  }
  return worker0;
}

}  // namespace

IterationPrediction simulate_cgdp(const CostInputs& in, const ChunkPlan& plan) {
  IterationPrediction p;
  p.forward_us = in.forward_us;
  p.update_us = update_us(in);
  if (!in.exchanges()) {  // train runs one worker `local`: nothing to exchange
    p.backward_us = in.backward_total_us();
    p.iteration_us = p.forward_us + p.backward_us + p.update_us;
    return p;
  }
  EventSim sim;
  const CgdpStreams streams = make_streams(sim, in, chunk_stages(in, 0, 0));
  std::vector<int> ready_task;               // worker 0's compute task per chunk
  std::vector<std::vector<int>> stage_task;  // worker 0's task per chunk and stage
  std::vector<std::vector<StageCost>> stages;
  for (const Chunk& chunk : plan.chunks) {
    double compute_us = in.sync_us;  // the chunk's layers, then its sync point
    for (int i = chunk.first; i <= chunk.last; ++i) compute_us += in.params[i].backward_us;
    std::vector<int> ready;
    for (int w = 0; w < in.devices; ++w)
      ready.push_back(sim.add({streams.compute[w], compute_us, 0, 0, -1, {}, 0}));
    ready_task.push_back(ready[0]);
    stages.push_back(chunk_stages(in, chunk.offset * 4, chunk.count * 4));
    // The exchange and the layers computed beside it slow each other (shared cores, or
    // bandwidth); after the last chunk little backward is left to slow, or to slow it.
    const bool beside = &chunk != &plan.chunks.back();
    const std::vector<StageCost> timed = beside ? beside_layers(in, stages.back()) : stages.back();
    stage_task.push_back(add_chunk_stages(sim, streams, timed, ready));
    // Its core time, not its stretched wall time, is what the exchange takes from the layers.
    const double contention = contention_us(in, stages.back()) + overlap_us(in, chunk.count * 4);
    if (contention > 0 && beside)
      for (int w = 0; w < in.devices; ++w)
        sim.add({streams.compute[w], contention, 0, 0, -1, {}, 0});
    for (const StageCost& st : timed)
      if (!st.per_worker && st.name == "sum") p.sum_us += st.fixed_us;
  }
  const int tail = sim.add({streams.compute[0], in.tail_backward_us, 0, 0, -1, {}, 0});
  sim.run();
  p.backward_us = sim.end_us(tail);
  p.exchange_after_backward_us = std::max(0.0, sim.makespan_us() - p.backward_us);
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    ChunkTiming t{sim.end_us(ready_task[c]), {}};
    for (size_t k = 0; k < stages[c].size(); ++k)
      t.stages.push_back(
          {stages[c][k].name, sim.start_us(stage_task[c][k]), sim.end_us(stage_task[c][k])});
    p.chunks.push_back(std::move(t));
  }
  p.iteration_us = p.forward_us + p.backward_us + p.exchange_after_backward_us + p.update_us;
  return p;
}

IterationPrediction simulate_ps0(const CostInputs& in) {
  IterationPrediction p;
  p.forward_us = in.forward_us;
  p.update_us = update_us(in);
  p.backward_us = in.backward_total_us();
  const int64_t bytes = in.param_bytes();
  EventSim sim;
  const int pool = sim.add_pool(in.p2p_shares_host_memory ? in.host_memory_gbps : 0);
  std::vector<int> compute, d2h, h2d, last;  // streams per worker; last compute task per worker
  for (int w = 0; w < in.devices; ++w) {
    compute.push_back(sim.add_stream());
    d2h.push_back(sim.add_stream());
    h2d.push_back(sim.add_stream());
    last.push_back(sim.add({compute[w], p.backward_us, 0, 0, -1, {}, 0}));
  }
  // No sync_us on the hand-offs: the paper's classic scheme has t_as = 0 (sec. 3.1); its one
  // exchange after backward waits on events, not on per-layer sync points.
  const EventSim::Task copy{0, in.p2p.latency_us, bytes, in.p2p.gbps, pool, {}, 0};
  std::vector<std::pair<int, int>> edges;  // (parent, child): stride 1, then 2, 4, ...
  for (int stride = 1; stride < in.devices; stride *= 2)
    for (int child = stride; child < in.devices; child += 2 * stride)
      edges.push_back({child - stride, child});
  for (const auto& [parent, child] : edges) {
    EventSim::Task send = copy;
    send.stream = d2h[child];
    send.deps = {last[child]};
    const int sent = sim.add(send);
    last[parent] = sim.add({compute[parent], device_sum_us(in, bytes), 0, 0, -1, {sent}, 0});
    p.sum_us += device_sum_us(in, bytes);
  }
  const int update = sim.add({compute[0], p.update_us, 0, 0, -1, {last[0]}, 0});
  std::vector<int> params(in.devices, update);
  for (auto e = edges.rbegin(); e != edges.rend(); ++e) {
    EventSim::Task down = copy;
    down.stream = h2d[e->second];
    down.deps = {params[e->first], last[e->second]};
    params[e->second] = sim.add(down);
  }
  sim.run();
  p.exchange_after_backward_us = sim.start_us(update) - p.backward_us;
  p.broadcast_us = sim.makespan_us() - sim.end_us(update);
  p.iteration_us =
      p.forward_us + p.backward_us + p.exchange_after_backward_us + p.update_us + p.broadcast_us;
  return p;
}

}  // namespace cgdp
