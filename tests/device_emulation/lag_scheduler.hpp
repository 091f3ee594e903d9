// CGDP_EMULATED_STREAMS=lagging: a stream's work runs only when something waits for it (a
// synchronisation, or another stream's event wait), or when no stream runs anything and the host
// has issued nothing for a moment; then the stream pushed to last catches up first. So a consumer
// that does not wait for its producer runs before it (unless something else waited for the
// producer first) and reads what was not yet written; and work that nobody waits for (a host
// function a host thread expects) still runs.
#pragma once

#include <cstdint>

namespace cgdp_device_emulation {

class StreamThread;

namespace lag_scheduler {

// A lagging stream's thread comes and goes; `remove` returns once the scheduler no longer uses it.
void add(StreamThread* stream);
void remove(StreamThread* stream);
// Now, on the clock `pushed` and StreamThread::lags read.
int64_t now_ns();
// How long the host must issue nothing to count as idle (1 ms unless a test sets it).
void set_idle_ns(int64_t ns);
// A lagging stream's thread starts (true) or ends (false) a piece of work: the GPU is not idle.
void working(bool started);
// Work was pushed: the host is not idle.
void pushed(int64_t when_ns);

}  // namespace lag_scheduler
}  // namespace cgdp_device_emulation
