// Timeline events for work on a stream, taken in stream order by host functions (so the times are
// when the stream really ran the work, on either backend). Cost nothing when the timeline is off.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cgdp/device/device.hpp"
#include "cgdp/trace/timeline.hpp"

namespace cgdp {

// Issues `issue()` (work on `stream`) between two timestamps; the span becomes one event. With
// the timeline off it only issues: the name and counts stay unbuilt.
template <typename Issue>
void traced(Stream& stream, Timeline& timeline, int pid, const char* track, TraceName name,
            const char* category, Issue&& issue, TraceCounts counts = {}) {
  if (!timeline.enabled()) {
    issue();
    return;
  }
  auto begin = std::make_shared<int64_t>(0);
  stream.launch_host_func([begin, &timeline] { *begin = timeline.now_us(); });
  issue();
  stream.launch_host_func(
      [=, &timeline, name = name.str(), args = to_trace_args(counts)]() mutable {
        timeline.add(pid, track, name, category, *begin, timeline.now_us(), std::move(args));
      });
}

// Writes the stream-order time into *slot when the stream reaches this point (phase tables).
inline void mark(Stream& stream, const Timeline& timeline, int64_t* slot) {
  stream.launch_host_func([slot, &timeline] { *slot = timeline.now_us(); });
}

}  // namespace cgdp
