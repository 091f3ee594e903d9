// `cgdp train` under mpirun or srun: the host list and this process's rank come from the
// launcher instead of --hosts and --rank.
#pragma once

#include <cstdio>

#include "cgdp/launchers/launcher_env.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

inline constexpr const char* kMasterAddrEnv = "CGDP_MASTER_ADDR";

// When `config` has no --hosts and a launcher started this process as one of several ranks, fills
// hosts and rank: Slurm names every rank's node; under MPI the ranks meet at --master (or
// $CGDP_MASTER_ADDR). The k-th rank on a host gets shard_port + k. Several ranks on one host are
// for the CPU backend: on CUDA each rank takes its host's --devices GPUs, so a second rank on a
// host is refused. Writes one line to `log` saying what it took. UsageError for what is missing.
void take_hosts_from_launcher(TrainConfig& config, const GetEnv& getenv, FILE* log);

}  // namespace cgdp
