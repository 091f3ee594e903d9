// The classic scheme (the CGDP paper's steps T-1..T-5; Caffe's P2PSync): after backward, gradients
// are summed up a binary tree of workers into worker 0, which updates; parameters then go back
// down the tree, and each worker waits for them before its next forward.
#include <atomic>
#include <memory>

#include "cgdp/sync/device_sum.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "cgdp/sync/peer_access.hpp"
#include "cgdp/sync/sync_scheme.hpp"
#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

namespace {

struct TreeEdge {
  int parent = 0;
  int child = 0;
};

// Reduction order: pairs at stride 1, then 2, 4, ... (children first at each level).
std::vector<TreeEdge> reduction_edges(int workers) {
  std::vector<TreeEdge> edges;
  for (int stride = 1; stride < workers; stride *= 2)
    for (int child = stride; child < workers; child += 2 * stride) edges.push_back({child - stride, child});
  return edges;
}

class Ps0Sync final : public SyncScheme {
 public:
  Ps0Sync(const SyncWorkers& workers, const SyncOptions& o, Timeline& timeline)
      : timeline_(timeline), edges_(reduction_edges(static_cast<int>(workers.size()))) {
    workers[0].get().solver =
        std::make_unique<Solver<float>>(*workers[0].get().net, o.lr, o.solver, o.history, 0);
    const size_t bytes =
        static_cast<size_t>(workers[0].get().net->device_learnable_count()) * sizeof(float);
    std::vector<std::pair<Device*, Device*>> pairs;
    for (const TreeEdge& e : edges_)
      pairs.emplace_back(workers[e.parent].get().device.get(), workers[e.child].get().device.get());
    peer_note_ = enable_peer_access(pairs);
    for (const TreeEdge& e : edges_) {
      // The parent's device holds a copy of each child's gradients: memory cgdp does not need.
      receive_.emplace_back(*workers[e.parent].get().device, bytes);
      sent_.push_back(workers[e.child].get().device->create_event());
    }
    for (SyncWorker& w : workers) {
      ready_.push_back(w.device->create_event());
      params_ready_.push_back(w.device->create_event());
    }
  }

  SyncKind kind() const override { return SyncKind::Ps0; }

  void begin_iteration(SyncWorker& w, int64_t) override {
    w.compute->wait(*params_ready_[w.index]);  // broadcast of the last update (none at the start)
  }

  void exchange_and_update(const SyncWorkers& workers, double grad_scale, int64_t) override {
    sum_us_ = 0;
    const int64_t n = workers[0].get().net->device_learnable_count();
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    for (size_t e = 0; e < edges_.size(); ++e) {  // gather: children into parents
      SyncWorker& child = workers[edges_[e].child];
      SyncWorker& parent = workers[edges_[e].parent];
      float* recv = static_cast<float*>(receive_[e].get());
      child.compute->record(*ready_[child.index]);
      child.d2h->wait(*ready_[child.index]);
      traced(*child.d2h, timeline_, child.index, "d2h", {"send grads to worker ", parent.index}, "p2p",
             [&] { child.d2h->copy_async(recv, child.net->flat_diff().data(), bytes); });
      child.d2h->record(*sent_[e]);
      parent.compute->wait(*sent_[e]);
      traced(*parent.compute, timeline_, parent.index, "compute",
             {"add grads of worker ", child.index}, "sum", [&] {
               accumulate(parent, recv, n);
               accumulate_streamed(parent, child);
             });
    }
    SyncWorker& root = workers[0];
    mark(*root.compute, timeline_, &root.marks.exchange_end);
    traced(*root.compute, timeline_, 0, "compute", "update", "update",
           [&] { root.solver->step(*root.compute, grad_scale); });
    mark(*root.compute, timeline_, &root.marks.update_end);
    for (auto e = edges_.rbegin(); e != edges_.rend(); ++e) {  // broadcast: parents to children
      SyncWorker& child = workers[e->child];
      SyncWorker& parent = workers[e->parent];
      parent.compute->record(*ready_[parent.index]);
      child.h2d->wait(*ready_[parent.index]);
      child.h2d->wait(*ready_[child.index]);  // the child has finished with its old parameters
      traced(*child.h2d, timeline_, child.index, "h2d", {"parameters from worker ", parent.index},
             "p2p", [&] {
               child.h2d->copy_async(child.net->flat_data().data(), parent.net->flat_data().data(),
                                     bytes);
               const std::span<float> streamed = parent.net->host_flat_data();  // host to host
               if (!streamed.empty())
                 child.h2d->copy_async(child.net->host_flat_data().data(), streamed.data(),
                                       streamed.size_bytes());
             });
      child.h2d->record(*params_ready_[child.index]);
      child.compute->wait(*params_ready_[child.index]);  // before it forwards them further down
      mark(*child.compute, timeline_, &child.marks.exchange_end);
      child.marks.update_end = 0;
    }
  }

  int64_t last_sum_us() const override { return sum_us_; }
  std::string placement_note() const override { return peer_note_; }

 private:
  // Adds a child's gradients into the parent's on the parent's compute stream (a kernel on CUDA),
  // timed in stream order by host functions around it.
  void accumulate(SyncWorker& parent, const float* recv, int64_t n) {
    float* sum = parent.net->flat_diff().data();
    auto begin = std::make_shared<int64_t>(0);
    parent.compute->launch_host_func([this, begin] { *begin = timeline_.now_us(); });
    issue_sum(*parent.compute, parent.device->kind(), sum, {sum, recv}, n);
    parent.compute->launch_host_func([this, begin] { sum_us_ += timeline_.now_us() - *begin; });
  }

  // The streamed weights' gradients (Net::host_flat_diff) wait on the host: the parent adds the
  // child's there, in the same tree order, once its compute stream has waited for the child's
  // gradients (sent_ follows the child's backward).
  static void accumulate_streamed(SyncWorker& parent, SyncWorker& child) {
    float* sum = parent.net->host_flat_diff().data();
    const float* other = child.net->host_flat_diff().data();
    const auto n = static_cast<int64_t>(parent.net->host_flat_diff().size());
    if (n == 0) return;
    parent.compute->launch_host_func([sum, other, n] {
      const float* both[] = {sum, other};
      sum_buffers(sum, both, n, 0);
    });
  }

  Timeline& timeline_;
  std::vector<TreeEdge> edges_;
  std::vector<DeviceBuffer> receive_;              // per edge, on the parent's device
  std::vector<std::unique_ptr<Event>> sent_;       // per edge
  std::vector<std::unique_ptr<Event>> ready_;      // per worker: gradients / parameters ready
  std::vector<std::unique_ptr<Event>> params_ready_;
  std::atomic<int64_t> sum_us_{0};  // parents add on their own compute threads
  std::string peer_note_;           // which tree edges copy GPU to GPU directly
};

}  // namespace

std::unique_ptr<SyncScheme> make_ps0_sync(const SyncWorkers& workers, const SyncOptions& o,
                                          Timeline& timeline) {
  return std::make_unique<Ps0Sync>(workers, o, timeline);
}

}  // namespace cgdp
