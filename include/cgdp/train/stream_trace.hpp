// Timeline events for work on a stream, taken in stream order by host functions (so the times are
// when the stream really ran the work, on either backend). Cost nothing when the timeline is off.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cgdp/device/device.hpp"
#include "cgdp/train/timeline.hpp"

namespace cgdp {

// Issues `issue()` (work on `stream`) between two timestamps; the span becomes one event.
inline void traced(Stream& stream, Timeline& timeline, int pid, const std::string& track,
                   const std::string& name, const char* category, const std::function<void()>& issue,
                   TraceArgs args = {}) {
  if (!timeline.enabled()) {
    issue();
    return;
  }
  auto begin = std::make_shared<int64_t>(0);
  stream.launch_host_func([begin, &timeline] { *begin = timeline.now_us(); });
  issue();
  stream.launch_host_func([=, &timeline, args = std::move(args)]() mutable {
    timeline.add(pid, track, name, category, *begin, timeline.now_us(), std::move(args));
  });
}

// Writes the stream-order time into *slot when the stream reaches this point (phase tables).
inline void mark(Stream& stream, const Timeline& timeline, int64_t* slot) {
  stream.launch_host_func([slot, &timeline] { *slot = timeline.now_us(); });
}

}  // namespace cgdp
