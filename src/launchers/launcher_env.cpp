// Launcher environments: each launcher's variables, checked and turned into a LauncherRank.
#include "cgdp/launchers/launcher_env.hpp"

#include <charconv>
#include <string_view>

#include "cgdp/core/error.hpp"
#include "cgdp/launchers/slurm_lists.hpp"

namespace cgdp {

namespace {

// The integer in `name`, or nullopt when unset; UsageError when it is not one >= `min`.
std::optional<int> integer(const GetEnv& getenv, const char* name, int min) {
  const char* text = getenv(name);
  if (!text) return std::nullopt;
  const std::string_view s(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value < min)
    throw UsageError(cat(name, "='", s, "': expected an integer >= ", min));
  return value;
}

int required(const GetEnv& getenv, const char* name, int min, const char* launcher) {
  const std::optional<int> v = integer(getenv, name, min);
  if (!v) throw UsageError(cat(launcher, " set a rank but not ", name));
  return *v;
}

void check_rank(const LauncherRank& r, const char* rank_var) {
  if (r.rank >= r.size)
    throw UsageError(cat(rank_var, "=", r.rank, " is not below the ", r.size, " ranks"));
}

// Slurm's block layout: node n runs tasks_per_node[n] consecutive ranks.
std::vector<std::string> slurm_hosts(const GetEnv& getenv, int size) {
  const char* list_var = getenv("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const char* list = getenv(list_var);
  if (!list) throw UsageError("Slurm set SLURM_PROCID but neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST");
  const std::vector<std::string> nodes = expand_slurm_nodelist(list, list_var);
  if (const char* d = getenv("SLURM_DISTRIBUTION"); d && std::string_view(d).substr(0, 5) != "block")
    throw UsageError(cat("SLURM_DISTRIBUTION=", d, ": cgdp needs ranks in order per node (srun --distribution=block)"));
  const char* per_node_var = getenv("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  std::vector<int> per_node(nodes.size(), 1);
  if (const char* t = getenv(per_node_var)) per_node = expand_slurm_tasks_per_node(t, per_node_var);
  if (per_node.size() != nodes.size())
    throw UsageError(cat(per_node_var, " counts ", per_node.size(), " nodes, ", list_var, " ", nodes.size()));
  std::vector<std::string> hosts;
  for (size_t n = 0; n < nodes.size(); ++n) hosts.insert(hosts.end(), static_cast<size_t>(per_node[n]), nodes[n]);
  if (static_cast<int>(hosts.size()) != size)
    throw UsageError(cat(per_node_var, " places ", hosts.size(), " tasks but SLURM_NTASKS is ", size));
  return hosts;
}

// The variables an MPI launcher sets for each rank.
struct MpiVariables {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* size_otherwise;  // read when `size` is unset (PMIx keeps the size in its server)
  const char* local_rank;
  const char* local_size;
};
constexpr MpiVariables kOpenMpi{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr,
                                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr MpiVariables kPmix{"PMIx", "PMIX_RANK", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_LOCAL_RANK",
                             "PMIX_LOCAL_SIZE"};
constexpr MpiVariables kPmi{"PMI (MPICH/Hydra)", "PMI_RANK", "PMI_SIZE", nullptr, "MPI_LOCALRANKID",
                            "MPI_LOCALNRANKS"};

LauncherRank read_mpi(const GetEnv& getenv, const MpiVariables& v) {
  LauncherRank r;
  r.launcher = v.launcher;
  r.rank = required(getenv, v.rank, 0, v.launcher);
  const std::optional<int> size = integer(getenv, v.size, 1);
  r.size = size || !v.size_otherwise ? required(getenv, v.size, 1, v.launcher)
                                     : required(getenv, v.size_otherwise, 1, v.launcher);
  r.local_rank = integer(getenv, v.local_rank, 0).value_or(0);
  r.local_size = integer(getenv, v.local_size, 1).value_or(1);
  check_rank(r, v.rank);
  return r;
}

}  // namespace

std::optional<LauncherRank> detect_launcher(const GetEnv& getenv) {
  if (integer(getenv, kOpenMpi.rank, 0)) return read_mpi(getenv, kOpenMpi);
  if (integer(getenv, "SLURM_PROCID", 0)) {
    LauncherRank r;
    r.launcher = "Slurm";
    r.rank = required(getenv, "SLURM_PROCID", 0, "Slurm");
    r.size = integer(getenv, "SLURM_STEP_NUM_TASKS", 1).value_or(required(getenv, "SLURM_NTASKS", 1, "Slurm"));
    r.local_rank = integer(getenv, "SLURM_LOCALID", 0).value_or(0);
    check_rank(r, "SLURM_PROCID");
    r.hosts = slurm_hosts(getenv, r.size);
    r.local_size = 0;
    for (const std::string& h : r.hosts) r.local_size += h == r.hosts[r.rank];
    return r;
  }
  if (integer(getenv, kPmix.rank, 0)) return read_mpi(getenv, kPmix);
  if (integer(getenv, kPmi.rank, 0)) return read_mpi(getenv, kPmi);
  return std::nullopt;
}

}  // namespace cgdp
