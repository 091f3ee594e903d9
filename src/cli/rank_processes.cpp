// Rank processes: posix_spawn with piped output, a poll loop that prefixes and forwards lines,
// and stopping everyone once one rank fails.
#include "cli/rank_processes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "cgdp/core/error.hpp"

extern char** environ;

namespace cgdp::cli {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGrace = std::chrono::seconds(5);  // SIGTERM, then SIGKILL after this
constexpr int kPollMs = 100;

struct Pipe {
  int read = -1, write = -1;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw IoError(cat("launch: pipe: ", std::strerror(errno)));
  return {fds[0], fds[1]};
}

// A started rank: its pid and the read ends of its stdout and stderr (-1 once at end of file).
struct Child {
  pid_t pid = -1;
  int fds[2] = {-1, -1};
  std::string partial[2];  // text after the last newline
  bool exited = false;
  int status = 0;
};

std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  auto key = [](const std::string& s) { return s.substr(0, s.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (std::none_of(extra.begin(), extra.end(),
                     [&](const std::string& x) { return key(x) == key(entry); }))
      env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Child spawn(const RankProcess& rank) {
  const Pipe out = make_pipe(), err = make_pipe();
  const Pipe in = rank.stdin_text.empty() ? Pipe{} : make_pipe();
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  if (in.read >= 0)
    ::posix_spawn_file_actions_adddup2(&actions, in.read, 0);
  else
    ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  ::posix_spawn_file_actions_adddup2(&actions, err.write, 2);
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t defaults;  // the launcher ignores SIGPIPE; its ranks must not inherit that
  ::sigemptyset(&defaults);
  ::sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = rank.argv, env = environment_with(rank.env);
  Child child;
  const int rc = ::posix_spawnp(&child.pid, args[0].c_str(), &actions, &attr,
                                c_strings(args).data(), c_strings(env).data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  for (int fd : {out.write, err.write, in.read})
    if (fd >= 0) ::close(fd);
  child.fds[0] = out.read;
  child.fds[1] = err.read;
  if (rc != 0) {
    for (int fd : {out.read, err.read, in.write})
      if (fd >= 0) ::close(fd);
    throw IoError(cat(rank.name, ": cannot start ", args[0], ": ", std::strerror(rc)));
  }
  if (in.write >= 0) {  // small (a token line): fits the pipe, so this never blocks
    [[maybe_unused]] const ssize_t n =
        ::write(in.write, rank.stdin_text.data(), rank.stdin_text.size());
    ::close(in.write);
  }
  return child;
}

// Reads what is there on stream `s` (0: stdout, 1: stderr) and forwards its complete lines.
void pump(Child& c, int s, const std::string& prefix, FILE* sink) {
  char buffer[65536];
  const ssize_t n = ::read(c.fds[s], buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return;
  std::string& text = c.partial[s];
  if (n <= 0) {  // end of file: the last line may lack its newline
    if (!text.empty()) std::fprintf(sink, "%s%s\n", prefix.c_str(), text.c_str());
    text.clear();
    ::close(c.fds[s]);
    c.fds[s] = -1;
  } else {
    text.append(buffer, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
      std::fprintf(sink, "%s%.*s\n", prefix.c_str(), static_cast<int>(end - begin),
                   text.data() + begin);
    text.erase(0, begin);
  }
  std::fflush(sink);
}

// Forwards output for up to `wait_ms`; returns false when no pipe is open any more.
bool forward_output(std::vector<Child>& children, FILE* out, FILE* err, int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, int>> owner;
  for (size_t i = 0; i < children.size(); ++i)
    for (int s = 0; s < 2; ++s)
      if (children[i].fds[s] >= 0) {
        fds.push_back({children[i].fds[s], POLLIN, 0});
        owner.push_back({i, s});
      }
  if (fds.empty()) return false;
  if (::poll(fds.data(), fds.size(), wait_ms) <= 0) return true;
  for (size_t k = 0; k < fds.size(); ++k)
    if (fds[k].revents != 0) {
      const auto [i, s] = owner[k];
      pump(children[i], s, cat("[", i, "] "), s == 0 ? out : err);
    }
  return true;
}

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return cat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return cat("was killed by signal ", WTERMSIG(status), " (", ::strsignal(WTERMSIG(status)), ")");
  return "ended";
}

void signal_running(std::vector<Child>& children, int sig) {
  for (Child& c : children)
    if (!c.exited) ::kill(c.pid, sig);
}

}  // namespace

void run_ranks(const std::vector<RankProcess>& ranks, FILE* out, FILE* err) {
  ::signal(SIGPIPE, SIG_IGN);  // a rank that exits before reading its stdin must not kill us
  std::vector<Child> children;
  try {
    for (const RankProcess& r : ranks) children.push_back(spawn(r));
  } catch (...) {
    signal_running(children, SIGKILL);
    for (Child& c : children) ::waitpid(c.pid, nullptr, 0);
    throw;
  }
  int failed = -1;
  Clock::time_point failed_at;
  bool killed = false;
  auto running = [&] {
    return std::any_of(children.begin(), children.end(), [](const Child& c) { return !c.exited; });
  };
  while (running()) {
    forward_output(children, out, err, kPollMs);
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (c.exited || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      if (failed < 0 && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
        failed = static_cast<int>(i);
        failed_at = Clock::now();
        signal_running(children, SIGTERM);
      }
    }
    if (failed >= 0 && !killed && Clock::now() - failed_at > kGrace) {
      signal_running(children, SIGKILL);
      killed = true;
    }
  }
  // What the ranks printed last; a pipe some grandchild still holds is left after a short wait.
  const auto drain_until = Clock::now() + std::chrono::milliseconds(500);
  while (Clock::now() < drain_until && forward_output(children, out, err, kPollMs)) {
  }
  for (Child& c : children)
    for (int fd : c.fds)
      if (fd >= 0) ::close(fd);
  if (failed >= 0)
    throw RuntimeCheckError(cat(ranks[failed].name, " ", how_it_ended(children[failed].status),
                                "; stopped the other ranks"));
}

}  // namespace cgdp::cli
