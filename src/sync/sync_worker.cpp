// Naming a worker's failed stream (sync_worker.hpp).
#include "cgdp/sync/sync_worker.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

void synchronize_stream(SyncWorker& w, Stream& stream, const char* name, int64_t iteration) {
  try {
    stream.synchronize();
  } catch (const std::exception& e) {
    throw DeviceError(cat("worker ", w.index, " (", w.device->name(), "), ", name,
                          " stream, iteration ", iteration, ": ", e.what()));
  }
}

}  // namespace cgdp
