// Recording trace events under a mutex and writing them as Chrome trace JSON.
#include "cgdp/trace/timeline.hpp"

#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace {

nlohmann::json to_json(const TraceArgs& args) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& arg : args) std::visit([&](const auto& v) { out[arg.key] = v; }, arg.value);
  return out;
}

nlohmann::json metadata(const char* what, int pid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
}

std::string default_process_name(int pid) {
  return pid == Timeline::kAggregatorPid ? "host aggregator" : cat("worker ", pid);
}

}  // namespace

Timeline::Timeline(bool enabled) : enabled_(enabled), start_(Clock::now()) {}

void Timeline::record(int pid, std::string_view track, std::string_view name, const char* category,
                      int64_t begin_us, int64_t end_us, TraceArgs args) {
  TraceEvent event{
      pid,    std::string(track), std::string(name), category ? category : "", begin_us,
      end_us, std::move(args)};
  const std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
}

void Timeline::set_process_name(int pid, std::string name) {
  const std::lock_guard lock(mutex_);
  process_names_[pid] = std::move(name);
}

std::vector<TraceEvent> Timeline::events() const {
  const std::lock_guard lock(mutex_);
  return {events_.begin(), events_.end()};
}

void Timeline::write(const std::filesystem::path& path) const {
  std::vector<TraceEvent> events;
  std::map<int, std::string> names;
  {  // a consistent snapshot; the JSON is built without holding the lock
    const std::lock_guard lock(mutex_);
    events.assign(events_.begin(), events_.end());
    names = process_names_;
  }
  // Track ids per process, in the order of the track names, so a trace's layout is stable.
  std::map<std::pair<int, std::string>, int> tids;
  for (const auto& e : events) tids.emplace(std::make_pair(e.pid, e.track), 0);
  std::map<int, int> tracks_of;  // pid -> tracks numbered so far
  for (auto& [key, tid] : tids) tid = ++tracks_of[key.first];
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& [pid, count] : tracks_of) {
    const auto named = names.find(pid);
    trace.push_back(metadata("process_name", pid,
                             named != names.end() ? named->second : default_process_name(pid)));
  }
  for (const auto& [key, tid] : tids) {
    auto m = metadata("thread_name", key.first, key.second);
    m["tid"] = tid;
    trace.push_back(std::move(m));
  }
  for (const auto& e : events)
    trace.push_back({{"name", e.name},
                     {"cat", e.category},
                     {"ph", "X"},
                     {"ts", e.begin_us},
                     {"dur", e.duration_us()},
                     {"pid", e.pid},
                     {"tid", tids.at({e.pid, e.track})},
                     {"args", to_json(e.args)}});
  const nlohmann::json document = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  write_file_atomically(path, document.dump());
}

Timeline::Scope::Scope(Timeline& timeline, int pid, std::string_view track, TraceName name,
                       const char* category, TraceCounts counts)
    : timeline_(timeline.enabled() ? &timeline : nullptr), pid_(pid), category_(category) {
  if (!timeline_) return;
  track_ = track;
  name_ = name.str();
  args_ = to_trace_args(counts);
  begin_us_ = timeline.now_us();
}

TraceArgs to_trace_args(TraceCounts counts) {
  TraceArgs args;
  args.reserve(counts.size());
  for (const auto& [key, value] : counts) args.emplace_back(key, value);
  return args;
}

std::string TraceName::str() const {
  std::string s(text);
  if (numbered) s += std::to_string(number);
  return s;
}

Timeline::Scope::~Scope() {
  if (timeline_)
    timeline_->record(pid_, track_, name_, category_, begin_us_, timeline_->now_us(),
                      std::move(args_));
}

}  // namespace cgdp
