// What a sync scheme sees of a data-parallel worker (the trainer's Worker, train/worker.hpp, is
// one): a device with its compute, D2H and H2D streams, its replica of the net, and a solver
// where it updates its own parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/solver.hpp"

namespace cgdp {

// Stream-order timestamps of one iteration (µs on the timeline clock), for the phase table.
struct PhaseMarks {
  int64_t begin = 0;          // the compute stream starts the iteration
  int64_t forward_begin = 0;  // parameters are in place (after any broadcast)
  int64_t forward_end = 0;
  int64_t backward_end = 0;
  int64_t exchange_end = 0;  // summed gradients are in place: the update may start
  int64_t update_end = 0;
};

struct SyncWorker {
  int index = 0;
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> compute, d2h, h2d;
  std::unique_ptr<Net<float>> net;
  std::unique_ptr<Solver<float>> solver;  // null where another worker updates (ps0)
  PhaseMarks marks;
};

// The workers a scheme exchanges among, by index; they outlive the scheme.
using SyncWorkers = std::vector<std::reference_wrapper<SyncWorker>>;

// Synchronizes one stream of a worker; rethrows a failure as a DeviceError naming the worker, its
// device, the stream and the iteration.
void synchronize_stream(SyncWorker& w, Stream& stream, const char* name, int64_t iteration);

}  // namespace cgdp
