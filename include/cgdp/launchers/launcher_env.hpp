// The rank, the rank count and (under Slurm) the peers' host names that a cluster launcher put in
// this process's environment: Open MPI's mpirun, Slurm's srun, PMIx, and MPICH/Hydra's PMI.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cgdp {

struct LauncherRank {
  std::string launcher;  // "Open MPI", "Slurm", "PMIx", "PMI (MPICH/Hydra)": for messages
  int rank = 0, size = 1;
  int local_rank = 0;    // among the ranks on this host
  int local_size = 1;    // ranks on this host (1 when the launcher does not say)
  // Slurm: the host of every rank, by rank. Empty under MPI: the ranks learn each other's
  // addresses from rank 0 (launchers/rendezvous.hpp).
  std::vector<std::string> hosts;
};

using GetEnv = std::function<const char*(const char* name)>;

// The launcher that started this process, or nullopt. Open MPI is read first (its mpirun may run
// inside a Slurm allocation), then Slurm, PMIx and PMI. Throws UsageError naming the variable for
// one that is malformed, and for a Slurm task layout other than block (ranks in order per node).
std::optional<LauncherRank> detect_launcher(const GetEnv& getenv);

}  // namespace cgdp
