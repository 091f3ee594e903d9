// One iteration as tasks on simulated streams: cgdp's chunk pipeline and ps0's tree.
#include "cgdp/cost/simulator.hpp"

#include <algorithm>
#include <array>

#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/cost/event_sim.hpp"
#include "cgdp/cost/fc_exchange.hpp"

namespace cgdp {

namespace {

// Streams of the cgdp simulation: per worker its compute stream and its D2H and H2D streams; one
// stream for each host queue (the aggregator's sum lanes, the network link).
struct CgdpStreams {
  std::vector<int> compute;                     // [worker]
  std::array<std::vector<int>, kQueues> queue;  // [queue][worker], one entry for a host queue
  int to_host = -1, from_host = -1;             // the sim's pools
};

CgdpStreams make_streams(EventSim& sim, const CostInputs& in) {
  CgdpStreams s;
  s.to_host = sim.add_pool(in.host_memory_gbps);
  s.from_host = sim.add_pool(in.host_memory_gbps);
  for (int w = 0; w < in.devices; ++w) {
    s.compute.push_back(sim.add_stream());
    s.queue[static_cast<int>(Queue::D2H)].push_back(sim.add_stream());
    s.queue[static_cast<int>(Queue::H2D)].push_back(sim.add_stream());
  }
  s.queue[static_cast<int>(Queue::Host)].push_back(sim.add_stream(in.sum_lanes));
  s.queue[static_cast<int>(Queue::Network)].push_back(sim.add_stream());
  return s;
}

// Adds the tasks of `stages` after the tasks `prev` (per worker), each host stage also after
// `host_after[k]` (the previous piece's on the same lane), when given; returns worker 0's task
// per stage.
std::vector<int> add_stages(EventSim& sim, const CgdpStreams& s,
                            const std::vector<StageCost>& stages, std::vector<int> prev,
                            const std::vector<int>& host_after = {}) {
  std::vector<int> worker0;
  for (size_t k = 0; k < stages.size(); ++k) {
    const StageCost& st = stages[k];
    const int pool = st.pool == Pool::ToHost     ? s.to_host
                     : st.pool == Pool::FromHost ? s.from_host
                                                 : -1;
    const std::vector<int>& streams = s.queue[static_cast<int>(st.queue)];
    EventSim::Task task{0, st.fixed_us, st.bytes, st.cap_gbps, pool, {}, 0};
    if (st.per_worker) {
      for (size_t w = 0; w < prev.size(); ++w) {
        task.stream = streams[w];
        task.deps = {prev[w]};
        prev[w] = sim.add(task);
      }
    } else {
      task.stream = streams[0];
      task.deps = prev;
      if (!host_after.empty()) task.deps.push_back(host_after[k]);
      std::fill(prev.begin(), prev.end(), sim.add(task));
    }
    worker0.push_back(prev[0]);
  }
  return worker0;
}

// The same compute task on every worker; returns them.
std::vector<int> add_compute(EventSim& sim, const CgdpStreams& s, double us) {
  std::vector<int> tasks;
  for (const int stream : s.compute) tasks.push_back(sim.add({stream, us, 0, 0, -1, {}, 0}));
  return tasks;
}

// An exchange beside the layers slows them (shared cores, or bandwidth) and is slowed by them;
// after the last param layer little backward is left to slow, or to slow it.
struct Pipelined {
  std::vector<StageCost> timed;  // the stages as they run
  double taken_us = 0;           // compute time they take from each worker
};

Pipelined beside_or_after(const CostInputs& in, const std::vector<StageCost>& stages,
                          bool beside, double overlap) {
  if (!beside) return {stages, 0};
  return {beside_layers(in, stages), contention_us(in, stages) + overlap};
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
  const CgdpStreams streams = make_streams(sim, in);
  std::vector<int> ready_task;  // worker 0's sync point per chunk
  // Worker 0's task per chunk and stage: of its first piece, and of its last.
  std::vector<std::vector<int>> stage_task, last_piece_task;
  std::vector<std::vector<StageCost>> stages;
  const auto add_pipelined = [&](const Pipelined& run, const std::vector<int>& ready,
                                 const std::vector<int>& host_after = {}) {
    const std::vector<int> worker0 = add_stages(sim, streams, run.timed, ready, host_after);
    if (run.taken_us > 0) add_compute(sim, streams, run.taken_us);
    for (const StageCost& st : run.timed)
      if (st.name == "sum") p.sum_us += st.fixed_us;
    return worker0;
  };
  for (const Chunk& chunk : plan.chunks) {
    // The chunk's layers; a factored weight leaves after its own layer and a sync point.
    for (int i = chunk.first; i <= chunk.last; ++i) {
      const ParamCost& param = in.params[i];
      const std::vector<int> done =
          add_compute(sim, streams, param.backward_us + (param.factored ? in.sync_us : 0));
      if (param.factored) {
        const std::vector<StageCost> list = factor_stages(in, param);
        add_pipelined(beside_or_after(in, list, i + 1 < in.num_params(),
                                      factor_overlap_us(in, param)),
                      done);
      }
    }
    const std::vector<int> ready = add_compute(sim, streams, in.sync_us);
    ready_task.push_back(ready[0]);
    const int64_t summed = in.summed_bytes(chunk.first, chunk.last);
    const int pieces = chunk_pieces(in, summed);
    const int64_t piece = summed / pieces;
    stages.push_back(summed > 0 ? chunk_stages(in, chunk.offset * 4, piece)
                                : std::vector<StageCost>{});
    const bool beside = &chunk != &plan.chunks.back();
    const Pipelined run =
        beside_or_after(in, stages.back(), beside, overlap_us(in, in.wire_bytes(piece)));
    stage_task.push_back(add_pipelined(run, ready));
    last_piece_task.push_back(stage_task.back());
    for (int k = 1; k < pieces; ++k)  // the D2H and H2D streams keep the pieces in order
      last_piece_task.back() = add_pipelined(run, ready, last_piece_task.back());
  }
  const int tail = sim.add({streams.compute[0], in.tail_backward_us, 0, 0, -1, {}, 0});
  sim.run();
  p.backward_us = sim.end_us(tail);
  p.exchange_after_backward_us = std::max(0.0, sim.makespan_us() - p.backward_us);
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    ChunkTiming t{sim.end_us(ready_task[c]), {}};
    for (size_t k = 0; k < stages[c].size(); ++k)
      t.stages.push_back(
          {stages[c][k].name, sim.start_us(stage_task[c][k]), sim.end_us(last_piece_task[c][k])});
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
