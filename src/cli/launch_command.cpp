// `cgdp launch --hosts h1,h2,... -- <train flags>`: one training rank per host, started directly
// on this machine or over ssh elsewhere (as `horovodrun -H`), with the host list, the rank and a
// shared cluster token filled in.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "cgdp/sync/host_list.hpp"
#include "cli/commands.hpp"
#include "cli/launcher_link.hpp"
#include "cli/rank_processes.hpp"

namespace cgdp::cli {

namespace {

struct LaunchFlags {
  std::vector<std::string> hosts;
  int port_base = 29600;
  std::string ssh = "ssh -o BatchMode=yes";
  std::vector<std::string> train_args;
};

// 'text' for a POSIX shell.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

// Local ranks share this machine's cores as the devices of one process would: each gets
// cores / local ranks threads (unless the flags set --threads), so a job launched here sums on the
// same thread counts as `--devices H*N` in one process and gives its bits.
void share_cores_between_local_ranks(std::vector<std::string>& train_args,
                                     const std::vector<HostPort>& hosts) {
  const auto local = std::count_if(hosts.begin(), hosts.end(),
                                   [](const HostPort& h) { return is_local_host(h.host); });
  if (local < 2 || has_flag(train_args, "--threads")) return;
  const int threads = std::max(1, omp_get_max_threads() / static_cast<int>(local));
  train_args.insert(train_args.end(), {"--threads", std::to_string(threads)});
}

// The token the ranks share: the caller's $CGDP_CLUSTER_TOKEN, none when the train flags name a
// --token-file (every host reads its own copy), else a fresh random one for this job.
std::string job_token(const std::vector<std::string>& train_args) {
  if (const char* given = std::getenv(kClusterTokenEnv); given && *given) return given;
  if (has_flag(train_args, "--token-file")) return "";
  std::random_device entropy;
  std::string token;
  for (int i = 0; i < 8; ++i) token += cat(std::hex, entropy() | 0x10000000u);  // 8 hex digits each
  return token;
}

// Rank r's process: `cgdp train` here, or the same command through `ssh host` (same binary path
// and working directory there); a remote rank reads the token from its standard input, so it
// never shows on a command line.
RankProcess rank_process(const LaunchFlags& f, const std::vector<HostPort>& hosts, int rank,
                         const std::string& token) {
  std::string list;
  for (const HostPort& h : hosts) list += (list.empty() ? "" : ",") + h.text();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self, "train", "--hosts", list, "--rank", std::to_string(rank)};
  args.insert(args.end(), f.train_args.begin(), f.train_args.end());
  const std::string& host = hosts[rank].host;
  RankProcess p;
  p.name = cat("rank ", rank, " (", host, ")");
  if (is_local_host(host)) {
    p.argv = std::move(args);
    p.env = {cat(kLauncherPidEnv, "=", ::getpid())};
    if (!token.empty()) p.env.push_back(cat(kClusterTokenEnv, "=", token));
    return p;
  }
  std::string command = token.empty() ? ""
                                      : cat("IFS= read -r ", kClusterTokenEnv, " && export ",
                                            kClusterTokenEnv, " && ");
  command += "cd " + shell_quote(std::filesystem::current_path().string()) + " && exec";
  for (const std::string& a : args) command += " " + shell_quote(a);
  p.argv = split_words(f.ssh);
  if (p.argv.empty()) throw UsageError("--ssh: empty command");
  p.argv.push_back(host);
  p.argv.push_back(command);
  if (!token.empty()) p.stdin_text = token + "\n";
  return p;
}

}  // namespace

Runner add_launch_command(CLI::App& app) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Train on several hosts: one rank per host, here or over ssh (flags after --)");
  cmd->add_option("--hosts", f->hosts, "Hosts, one rank each: h1,h2,... (host or host:port)")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--port-base", f->port_base, "Rank r's shard listens on port P + r")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--ssh", f->ssh,
                  "How to run a command on a remote host (words, then host, command)")
      ->capture_default_str();
  cmd->add_option("train_flags", f->train_args,
                  "The flags of cgdp train, after --, the same for every rank");
  return [f] {
    if (!f->train_args.empty() && f->train_args[0] == "train")
      f->train_args.erase(f->train_args.begin());
    for (const char* flag : {"--hosts", "--rank"})
      if (has_flag(f->train_args, flag))
        throw UsageError(
            cat("launch: leave ", flag, " out of the train flags; launch sets it for each rank"));
    const auto hosts = parse_host_list(f->hosts, [&](int rank) { return f->port_base + rank; });
    check_loopback_alone(hosts);
    const std::string token = job_token(f->train_args);
    share_cores_between_local_ranks(f->train_args, hosts);
    std::vector<RankProcess> ranks;
    for (int r = 0; r < static_cast<int>(hosts.size()); ++r)
      ranks.push_back(rank_process(*f, hosts, r, token));
    std::string plan;
    for (size_t r = 0; r < hosts.size(); ++r)
      plan += cat(r ? ", " : "", "rank ", r, " on ", hosts[r].text(),
                  is_local_host(hosts[r].host) ? "" : " (over ssh)");
    std::printf("cgdp launch: %zu ranks: %s\n", hosts.size(), plan.c_str());
    std::fflush(stdout);
    run_ranks(ranks, stdout, stderr);
    return 0;
  };
}

}  // namespace cgdp::cli
