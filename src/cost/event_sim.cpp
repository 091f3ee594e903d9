// The event loop: start what is ready, advance to the next finish, share each pool max-min fairly.
#include "cgdp/cost/event_sim.hpp"

#include <algorithm>
#include <limits>

#include "cgdp/core/error.hpp"

namespace cgdp {

struct EventSim::Running {
  int task = 0;
  double fixed_end = 0;  // the fixed part ends here; then the bytes move
  double remaining = 0;  // bytes still to move
  double rate = 0;       // bytes per microsecond while moving
};

int EventSim::add_stream(int width) {
  CGDP_ASSERT(width >= 1);
  streams_.emplace_back();
  widths_.push_back(width);
  return static_cast<int>(streams_.size()) - 1;
}

int EventSim::add_pool(double gbps) {
  pools_.push_back(gbps);
  return static_cast<int>(pools_.size()) - 1;
}

int EventSim::add(Task task) {
  const int id = static_cast<int>(tasks_.size());
  CGDP_ASSERT(task.stream >= 0 && task.stream < static_cast<int>(streams_.size()));
  CGDP_ASSERT(task.pool < static_cast<int>(pools_.size()) &&
              (task.bytes == 0 || task.cap_gbps > 0));
  for (const int dep : task.deps) CGDP_ASSERT(dep >= 0 && dep < id);
  streams_[task.stream].push_back(id);
  tasks_.push_back(std::move(task));
  return id;
}

double EventSim::makespan_us() const {
  double end = 0;
  for (const double e : end_) end = std::max(end, e);
  return end;
}

// Starts, in issue order, the next tasks of every stream with a free slot whose dependencies have
// finished (a task that must wait holds back the ones behind it).
void EventSim::start_ready(double now, std::vector<Running>& running, std::vector<size_t>& next) {
  for (size_t s = 0; s < streams_.size(); ++s) {
    auto busy = std::count_if(running.begin(), running.end(), [&](const Running& r) {
      return tasks_[r.task].stream == static_cast<int>(s);
    });
    for (; next[s] < streams_[s].size() && busy < widths_[s]; ++next[s], ++busy) {
      const int id = streams_[s][next[s]];
      const Task& t = tasks_[id];
      if (!std::all_of(t.deps.begin(), t.deps.end(), [&](int d) { return done_[d]; })) break;
      start_[id] = std::max(now, t.not_before_us);
      running.push_back({id, start_[id] + t.fixed_us, static_cast<double>(t.bytes), 0});
    }
  }
}

// Tasks past their fixed part move bytes: alone at their cap, or sharing their pool max-min
// fairly (the slowest capped tasks take their cap, the rest split what is left).
void EventSim::set_rates(std::vector<Running>& running, double now) const {
  std::vector<std::vector<Running*>> by_pool(pools_.size());
  for (Running& r : running) {
    const Task& t = tasks_[r.task];
    r.rate = t.cap_gbps * 1e3;
    if (r.fixed_end <= now && t.pool >= 0 && pools_[t.pool] > 0) by_pool[t.pool].push_back(&r);
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    auto& moving = by_pool[p];
    std::sort(moving.begin(), moving.end(),
              [](Running* a, Running* b) { return a->rate < b->rate; });
    double left = pools_[p] * 1e3;
    for (size_t i = 0; i < moving.size(); ++i) {
      moving[i]->rate = std::min(moving[i]->rate, left / static_cast<double>(moving.size() - i));
      left -= moving[i]->rate;
    }
  }
}

// When `r` would finish at its current rate; a task with no bytes left ends with its fixed part
// (its rate may be 0: 0/0 would never end the loop).
double EventSim::finish_us(const Running& r, double now) {
  if (r.fixed_end > now) return r.fixed_end;
  return r.remaining > 0 ? now + r.remaining / r.rate : now;
}

void EventSim::run() {
  const size_t n = tasks_.size();
  start_.assign(n, 0);
  end_.assign(n, 0);
  done_.assign(n, false);
  std::vector<size_t> next(streams_.size(), 0);
  std::vector<Running> running;
  double now = 0;
  size_t finished = 0;
  start_ready(now, running, next);
  while (finished < n) {
    if (running.empty()) throw Error("cost model: simulated tasks wait on each other forever");
    set_rates(running, now);
    double until = std::numeric_limits<double>::infinity();
    for (const Running& r : running) until = std::min(until, finish_us(r, now));
    for (Running& r : running)
      if (r.fixed_end <= now && r.remaining > 0) r.remaining -= r.rate * (until - now);
    now = until;
    for (auto it = running.begin(); it != running.end();) {
      const bool complete =
          it->fixed_end <= now && it->remaining <= 1e-6 * (1 + tasks_[it->task].bytes);
      if (!complete) {
        ++it;
        continue;
      }
      end_[it->task] = now;
      done_[it->task] = true;
      ++finished;
      it = running.erase(it);
    }
    start_ready(now, running, next);
  }
}

}  // namespace cgdp
