// From a launcher's environment to --hosts and --rank.
#include "cgdp/launchers/launched_hosts.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/launchers/rendezvous.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "cgdp/sync/host_list.hpp"

namespace cgdp {

namespace {

// Slurm: each rank's node, the k-th rank on a node at shard_port + k.
std::vector<std::string> slurm_host_list(const LauncherRank& l, int shard_port) {
  std::vector<std::string> hosts;
  for (size_t r = 0; r < l.hosts.size(); ++r) {
    int earlier = 0;
    for (size_t q = 0; q < r; ++q) earlier += l.hosts[q] == l.hosts[r];
    hosts.push_back(cat(l.hosts[r], ":", shard_port + earlier));
  }
  return hosts;
}

HostPort master_address(const TrainConfig& config, const GetEnv& getenv, const LauncherRank& l) {
  std::string text = config.master;
  if (text.empty() && getenv(kMasterAddrEnv)) text = getenv(kMasterAddrEnv);
  if (text.empty())
    throw UsageError(cat(l.launcher, " started rank ", l.rank, " of ", l.size, " without --hosts: give --master "
                         "HOST:PORT (or ", kMasterAddrEnv, "), where rank 0 tells the ranks each other's addresses"));
  const std::vector<HostPort> parsed = parse_host_list({text});
  if (l.rank == 0 && !is_local_host(parsed[0].host))
    throw UsageError(cat("--master ", text, ": rank 0 runs on this host, which is not ", parsed[0].host,
                         " (give rank 0's host)"));
  return parsed[0];
}

// --token-file on a shared file system that does not exist yet: rank 0 makes it, the others wait
// for it (up to the timeout) before anything reads it.
void share_token_file(const TrainConfig& config, const LauncherRank& l, FILE* log) {
  if (config.token_file.empty()) return;
  if (l.rank == 0) {
    if (create_cluster_token_file(config.token_file))
      std::fprintf(log, "cgdp: made the cluster token %s for the job's ranks\n", config.token_file.c_str());
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(std::ceil(config.timeout_s * 1000)));
  while (!std::filesystem::exists(config.token_file)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw UsageError(cat("--token-file ", config.token_file, ": not there after ", config.timeout_s,
                           " s (rank 0 makes it when missing: is the path on a file system every rank shares?)"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void take_hosts_from_launcher(TrainConfig& config, const GetEnv& getenv, FILE* log) {
  if (!config.hosts.empty()) return;
  const std::optional<LauncherRank> l = detect_launcher(getenv);
  if (!l || l->size == 1) return;
  if (config.device_kind == "cuda" && l->local_size > 1)
    throw UsageError(cat(l->launcher, " put ", l->local_size, " ranks on this host; with --device-kind cuda cgdp "
                         "runs one rank per host with its --devices GPUs (srun --ntasks-per-node=1, "
                         "mpirun --map-by ppr:1:node)"));
  const int shard_port = config.shard_port + l->local_rank;
  share_token_file(config, *l, log);
  const bool master_given = !config.master.empty() || getenv(kMasterAddrEnv);
  if (!l->hosts.empty()) {
    config.hosts = slurm_host_list(*l, config.shard_port);
  } else if (!master_given && l->local_size == l->size) {
    // Every rank on this host: rank r's shard on loopback at shard_port + r, nothing to exchange.
    for (int r = 0; r < l->size; ++r)
      config.hosts.push_back(cat("127.0.0.1:", config.shard_port + r));
  } else {
    RendezvousConfig r;
    r.master = master_address(config, getenv, *l);
    r.rank = l->rank;
    r.size = l->size;
    r.shard_port = shard_port;
    r.token = load_cluster_token(config.token_file);
    r.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(config.timeout_s * 1000)));
    config.hosts = rendezvous(r);
  }
  config.rank = l->rank;
  std::fprintf(log, "cgdp: %s rank %d of %d (local %d of %d): shard at %s\n", l->launcher.c_str(),
               l->rank, l->size, l->local_rank, l->local_size, config.hosts[l->rank].c_str());
  std::fflush(log);
}

}  // namespace cgdp
