// Multi-host jobs on loopback for tests: free ports, the `cgdp train` command line of each rank,
// and running all ranks of a job at once as real processes, each with its own log.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/io/safetensors.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp::testing {

inline const std::string kJobToken = "loopback-test-token-0123456789";
inline const std::string kCgdp = cat(testing::binary_dir(), "/cgdp");

// `count` TCP ports on 127.0.0.1 that nothing listens on now (bound together, then released).
// With `consecutive`, ports p, p+1, ... (for launch's --port-base).
inline std::vector<int> free_ports(int count, bool consecutive = false) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<int> fds, ports;
    bool ok = true;
    for (int i = 0; i < count && ok; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(consecutive && i > 0 ? static_cast<uint16_t>(ports[0] + i) : 0);
      socklen_t size = sizeof a;
      ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), size) == 0 &&
           ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0;
      fds.push_back(fd);
      if (ok) ports.push_back(ntohs(a.sin_port));
    }
    for (int fd : fds) ::close(fd);
    if (ok) return ports;
  }
  throw std::runtime_error("no free loopback ports");
}

inline std::string host_list(const std::vector<int>& ports) {
  std::string list;
  for (int p : ports) list += cat(list.empty() ? "" : ",", "127.0.0.1:", p);
  return list;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What one rank printed and how it ended (-1: it did not end by itself).
struct RankResult {
  int exit_code = -1;
  std::string output;
};

// A job of `hosts` ranks of `cgdp train <flags>` on fresh loopback ports; rank r's log is
// DIR/rank_r.log.
class LoopbackJob {
 public:
  LoopbackJob(const TempDir& dir, int hosts, std::string flags)
      : dir_(dir), hosts_(hosts), flags_(std::move(flags)), ports_(free_ports(hosts)) {}

  const std::vector<int>& ports() const { return ports_; }
  std::string host(int rank) const { return cat("127.0.0.1:", ports_[rank]); }
  std::string log(int rank) const { return (dir_ / cat("rank_", rank, ".log")).string(); }

  // Rank r's command line, its output going to its log; `extra` is added to its flags. Guarded,
  // it is killed after two minutes (so a hang fails the test); unguarded, `$!` after `&` is its
  // pid.
  std::string command(int rank, const std::string& extra = "", const std::string& token = kJobToken,
                      bool guarded = true) const {
    return cat("CGDP_CLUSTER_TOKEN=", token, guarded ? " timeout -s KILL 120 " : " ", kCgdp,
               " train --hosts ", host_list(ports_), " --rank ", rank, " ", flags_, " ", extra,
               " > ", log(rank), " 2>&1");
  }

  // Runs `script` (a shell script that starts the ranks, e.g. from command()) and collects each
  // rank's exit code (from "echo $? > DIR/rank_r.rc") and log.
  std::vector<RankResult> run(const std::string& script) const {
    run_command(cat("cd ", dir_.path().string(), " && { ", script, " ; } 2>/dev/null"));
    std::vector<RankResult> out(hosts_);
    for (int r = 0; r < hosts_; ++r) {
      const std::string rc = read_text(dir_ / cat("rank_", r, ".rc"));
      out[r].exit_code = rc.empty() ? -1 : std::stoi(rc);
      out[r].output = read_text(log(r));
    }
    return out;
  }

  // All ranks at once, rank r with `extra(r)` added to its flags. Ports taken meanwhile by
  // someone else (a rank "cannot listen") are replaced and the job is run again.
  template <typename Extra>
  std::vector<RankResult> run_all(Extra&& extra) {
    for (int attempt = 0;; ++attempt) {
      std::string script;
      for (int r = 0; r < hosts_; ++r)
        script += cat("{ ", command(r, extra(r)), "; echo $? > rank_", r, ".rc; } & ");
      std::vector<RankResult> results = run(script + "wait");
      const bool port_taken = std::any_of(results.begin(), results.end(), [](const RankResult& r) {
        return r.output.find("cannot listen on") != std::string::npos;
      });
      if (!port_taken || attempt == 3) return results;
      ports_ = free_ports(hosts_);
    }
  }
  std::vector<RankResult> run_all() {
    return run_all([](int) { return std::string(); });
  }

 private:
  const TempDir& dir_;
  int hosts_;
  std::string flags_;
  std::vector<int> ports_;
};

// Every tensor of a safetensors file, as floats.
inline std::map<std::string, std::vector<float>> load_tensors(const std::filesystem::path& path) {
  const SafetensorsFile file = load_safetensors(path);
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, entry] : file.tensors()) out[name] = file.values<float>(name);
  return out;
}

}  // namespace cgdp::testing
