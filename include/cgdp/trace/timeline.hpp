// A thread-safe recorder of what each worker's streams and the host aggregator did when, written
// as a Chrome trace (the JSON that Perfetto and chrome://tracing open).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cgdp {

template <typename T>
concept TraceNumber = std::integral<T> || std::floating_point<T>;

// One argument of an event: integers (indices, bytes), reals (rates) or text (layer names).
struct TraceArg {
  using Value = std::variant<int64_t, double, std::string>;

  template <TraceNumber T>
  TraceArg(std::string k, T v)
      : key(std::move(k)),
        value(std::floating_point<T> ? Value(static_cast<double>(v))
                                     : Value(static_cast<int64_t>(v))) {}
  TraceArg(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  TraceArg(std::string k, const char* v) : key(std::move(k)), value(std::string(v)) {}

  std::string key;
  Value value;
};
using TraceArgs = std::vector<TraceArg>;

// Numeric arguments as (key, value) pairs, turned into TraceArgs only when an event is recorded.
using TraceCounts = std::initializer_list<std::pair<const char*, int64_t>>;
TraceArgs to_trace_args(TraceCounts counts);

// An event's name as its parts, joined only when the timeline records it, so that a disabled
// timeline builds no strings: "d2h chunk 3" is {"d2h chunk ", 3}. It refers to its text: use it
// within the call it is passed to.
struct TraceName {
  TraceName(const char* text) : text(text) {}
  TraceName(const std::string& text) : text(text) {}
  TraceName(std::string_view prefix, int64_t number)
      : text(prefix), number(number), numbered(true) {}
  std::string str() const;

  std::string_view text;
  int64_t number = 0;
  bool numbered = false;
};

// A span of work on one track ("compute", "d2h", "h2d", "sum", ...) of one process (a worker, or
// the host aggregator). Times are microseconds since the timeline was created.
struct TraceEvent {
  int pid = 0;
  std::string track;
  std::string name;
  std::string category;
  int64_t begin_us = 0;
  int64_t end_us = 0;
  TraceArgs args;

  int64_t duration_us() const { return end_us - begin_us; }
};

class Timeline {
 public:
  // The process id the host aggregator's tracks go under; workers use their index.
  static constexpr int kAggregatorPid = 1000;

  explicit Timeline(bool enabled);

  bool enabled() const { return enabled_; }
  // Microseconds on the steady clock since this timeline was created.
  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
  }

  // Records a complete event. When disabled this is one branch; the caller's arguments are
  // built before the call, so build costly names or args only `if (timeline.enabled())`.
  void add(int pid, std::string_view track, std::string_view name, const char* category,
           int64_t begin_us, int64_t end_us, TraceArgs args = {}) {
    if (enabled_) record(pid, track, name, category, begin_us, end_us, std::move(args));
  }

  // Process names default to "worker N" and, for kAggregatorPid, "host aggregator".
  void set_process_name(int pid, std::string name);

  // A copy of everything recorded so far, in the order it was recorded.
  std::vector<TraceEvent> events() const;

  // Writes {"traceEvents": [...]} with process_name / thread_name metadata naming every process
  // and track, atomically (a crash leaves the old file or the whole new one). Throws IoError.
  void write(const std::filesystem::path& path) const;

  // Records [construction, destruction) of a block as one event, if the timeline is enabled.
  class Scope {
   public:
    Scope(Timeline& timeline, int pid, std::string_view track, TraceName name, const char* category,
          TraceCounts counts = {});
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Timeline* timeline_;  // null when disabled
    int pid_;
    std::string track_, name_;
    const char* category_;
    TraceArgs args_;
    int64_t begin_us_ = 0;
  };

 private:
  using Clock = std::chrono::steady_clock;

  void record(int pid, std::string_view track, std::string_view name, const char* category,
              int64_t begin_us, int64_t end_us, TraceArgs args);

  const bool enabled_;
  const Clock::time_point start_;
  mutable std::mutex mutex_;
  std::deque<TraceEvent> events_;  // appends never move recorded events
  std::map<int, std::string> process_names_;
};

}  // namespace cgdp
