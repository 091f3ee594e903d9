// Scale-out under cluster launchers: Slurm's node and task lists expanded as scontrol does, each
// launcher's environment read (and bad values named), the rendezvous under MPI, and whole jobs
// started by mpirun and by a simulated srun ending with the parameters of the same job started
// with --hosts, bit for bit; a rank killed under mpirun stops the job.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/launchers/launched_hosts.hpp"
#include "cgdp/launchers/launcher_env.hpp"
#include "cgdp/launchers/rendezvous.hpp"
#include "cgdp/launchers/slurm_lists.hpp"
#include "cgdp/shard/cluster_token.hpp"
#include "support/loopback_job.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using Strings = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

GetEnv from(const Env& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SlurmNodeList, ExpandsAsScontrolShowHostnames) {
  EXPECT_EQ(expand_slurm_nodelist("node7", "L"), (Strings{"node7"}));
  EXPECT_EQ(expand_slurm_nodelist("a,b", "L"), (Strings{"a", "b"}));
  EXPECT_EQ(expand_slurm_nodelist("gpu-a[01-03,07],cpu[1-2]", "L"),
            (Strings{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a07", "cpu1", "cpu2"}));
  EXPECT_EQ(expand_slurm_nodelist("n[8-11]", "L"), (Strings{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_slurm_nodelist("n[098-101]", "L"), (Strings{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_slurm_nodelist("r[1-2]-n[1-2],x", "L"), (Strings{"r1-n1", "r1-n2", "r2-n1", "r2-n2", "x"}));
  EXPECT_EQ(expand_slurm_nodelist("n[3]", "L"), (Strings{"n3"}));
  EXPECT_EQ(usage_error([] { expand_slurm_nodelist("n[1-3", "SLURM_JOB_NODELIST"); }),
            "SLURM_JOB_NODELIST='n[1-3': a '[' without its ']'");
  EXPECT_EQ(usage_error([] { expand_slurm_nodelist("n[3-1]", "L"); }), "L='n[3-1]': the range 3-1 runs backwards");
  EXPECT_EQ(usage_error([] { expand_slurm_nodelist("a,,b", "L"); }), "L='a,,b': an empty name");
  EXPECT_EQ(usage_error([] { expand_slurm_nodelist("n[a-b]", "L"); }), "L='n[a-b]': 'a' is not a number");
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(expand_slurm_tasks_per_node("2(x3),1", "T"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("4", "T"), (std::vector<int>{4}));
  EXPECT_EQ(usage_error([] { expand_slurm_tasks_per_node("2(x3", "T"); }), "T='2(x3': '2(x3' is not N or N(xM)");
}

TEST(LauncherEnv, ReadsEachLaunchersVariables) {
  EXPECT_FALSE(detect_launcher(from({})));
  const Env ompi{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                 {"SLURM_PROCID", "0"}};  // mpirun inside an allocation: Open MPI's rank counts
  auto r = detect_launcher(from(ompi));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->launcher, "Open MPI");
  EXPECT_EQ(r->rank, 2);
  EXPECT_EQ(r->size, 4);
  EXPECT_TRUE(r->hosts.empty());
  const Env slurm{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "5"}, {"SLURM_LOCALID", "1"},
                  {"SLURM_STEP_NODELIST", "gpu[1-2],cpu7"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}};
  r = detect_launcher(from(slurm));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->launcher, "Slurm");
  EXPECT_EQ(r->hosts, (Strings{"gpu1", "gpu1", "gpu2", "gpu2", "cpu7"}));
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->local_size, 2);
  r = detect_launcher(from({{"PMIX_RANK", "1"}, {"PMIX_SIZE", "2"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->launcher, "PMIx");
  EXPECT_EQ(r->size, 2);
  r = detect_launcher(from({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->launcher, "PMI (MPICH/Hydra)");
  EXPECT_EQ(r->size, 3);
}

TEST(LauncherEnv, BadValuesAreOneLineNamingTheVariable) {
  EXPECT_EQ(usage_error([] { detect_launcher(from({{"OMPI_COMM_WORLD_RANK", "x"}})); }),
            "OMPI_COMM_WORLD_RANK='x': expected an integer >= 0");
  EXPECT_EQ(usage_error([] { detect_launcher(from({{"PMI_RANK", "3"}, {"PMI_SIZE", "3"}})); }),
            "PMI_RANK=3 is not below the 3 ranks");
  EXPECT_EQ(usage_error([] { detect_launcher(from({{"PMI_RANK", "0"}})); }), "PMI (MPICH/Hydra) set a rank but not PMI_SIZE");
  Env slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a,b"},
            {"SLURM_DISTRIBUTION", "cyclic"}};
  EXPECT_EQ(usage_error([&] { detect_launcher(from(slurm)); }),
            "SLURM_DISTRIBUTION=cyclic: cgdp needs ranks in order per node (srun --distribution=block)");
  slurm.erase("SLURM_DISTRIBUTION");
  slurm["SLURM_NTASKS"] = "3";
  EXPECT_EQ(usage_error([&] { detect_launcher(from(slurm)); }),
            "SLURM_TASKS_PER_NODE places 2 tasks but SLURM_NTASKS is 3");
}

TEST(LaunchedHosts, SlurmNamesTheHostsAndMpiNeedsAMaster) {
  TrainConfig c;
  c.shard_port = 7000;
  const Env slurm{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "3"}, {"SLURM_STEP_NODELIST", "n[1-2]"},
                  {"SLURM_STEP_TASKS_PER_NODE", "2,1"}, {"SLURM_LOCALID", "1"}};
  FILE* null = std::fopen("/dev/null", "w");
  take_hosts_from_launcher(c, from(slurm), null);
  EXPECT_EQ(c.hosts, (Strings{"n1:7000", "n1:7001", "n2:7000"}));
  EXPECT_EQ(c.rank, 1);
  TrainConfig given;
  given.hosts = {"a:1", "b:1"};
  take_hosts_from_launcher(given, from(slurm), null);  // --hosts wins
  EXPECT_EQ(given.hosts, (Strings{"a:1", "b:1"}));
  TrainConfig cuda;
  cuda.device_kind = "cuda";
  EXPECT_NE(usage_error([&] { take_hosts_from_launcher(cuda, from(slurm), null); })
                .find("Slurm put 2 ranks on this host; with --device-kind cuda cgdp runs one rank per host"),
            std::string::npos);
  TrainConfig mpi;
  const Env ompi{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  EXPECT_EQ(usage_error([&] { take_hosts_from_launcher(mpi, from(ompi), null); }),
            "Open MPI started rank 1 of 2 without --hosts: give --master HOST:PORT (or CGDP_MASTER_ADDR), "
            "where rank 0 tells the ranks each other's addresses");
  // Every rank on this host: no master needed, each shard on loopback at its rank's port.
  TrainConfig local;
  local.shard_port = 7000;
  const Env ompi_local{{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  take_hosts_from_launcher(local, from(ompi_local), null);
  EXPECT_EQ(local.hosts, (Strings{"127.0.0.1:7000", "127.0.0.1:7001"}));
  EXPECT_EQ(local.rank, 1);
  std::fclose(null);
}

TEST(Rendezvous, EveryRankLearnsEveryShardAddress) {
  const int port = testing::free_ports(1)[0];
  std::vector<Strings> lists(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      lists[r] = rendezvous({{"127.0.0.1", port}, r, 3, 9000 + r, testing::kJobToken, std::chrono::seconds(20), {}});
    });
  for (auto& t : ranks) t.join();
  const Strings want{"127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"};
  for (const Strings& list : lists) EXPECT_EQ(list, want);
}

TEST(Rendezvous, AnotherTokenOrAMissingRankIsNamed) {
  const int port = testing::free_ports(1)[0];
  std::string error;
  std::thread zero([&] {
    error = usage_error([&] {
      rendezvous({{"127.0.0.1", port}, 0, 2, 9000, testing::kJobToken, std::chrono::seconds(20), {}});
    });
  });
  try {
    rendezvous({{"127.0.0.1", port}, 1, 2, 9001, "another-token-0123456789", std::chrono::seconds(3), {}});
  } catch (const Error&) {  // no list comes back to it
  }
  zero.join();
  EXPECT_NE(error.find("a rank's report is signed with another cluster token"), std::string::npos) << error;
  // A master port already taken is named.
  const int taken = testing::free_ports(1)[0];
  std::thread holder([&] {
    try {
      rendezvous({{"127.0.0.1", taken}, 0, 2, 9000, testing::kJobToken, std::chrono::milliseconds(1500), {}});
    } catch (const Error&) {  // nobody else reports: it times out
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_NE(usage_error([&] {
              rendezvous({{"127.0.0.1", taken}, 0, 2, 9000, testing::kJobToken, std::chrono::milliseconds(300), {}});
            }).find(cat("rank 0 cannot listen on port ", taken)),
            std::string::npos);
  holder.join();
  const int lonely = testing::free_ports(1)[0];
  try {
    rendezvous({{"127.0.0.1", lonely}, 0, 3, 9000, testing::kJobToken, std::chrono::milliseconds(300), {}});
    FAIL() << "expected RuntimeCheckError";
  } catch (const RuntimeCheckError& e) {
    EXPECT_NE(std::string(e.what()).find("no word from ranks 1, 2 of 3"), std::string::npos) << e.what();
  }
}

// Whole jobs: the same 2 (or 3) ranks started with --hosts, by mpirun and by a simulated srun.
const std::string kJob =
    "--data synthetic --batch 3 --lr 0.01 --devices 2 --iterations 4 --threads 1 --oversubscribe "
    "--plain --display 1 --test-interval -1 --test-samples 8 --test-batch 8 --timeout-s 20";

class LaunchedJob : public ::testing::Test {
 protected:
  std::vector<uint8_t> bytes(const std::string& name) const {
    const std::string text = testing::read_text(dir_ / name);
    return {text.begin(), text.end()};
  }
  // The job with --hosts on loopback; rank 0 saves to hosts.safetensors.
  std::vector<uint8_t> with_hosts(int ranks) {
    testing::LoopbackJob job(dir_, ranks, kJob);
    const auto results = job.run_all([&](int r) {
      return r == 0 ? cat(" --save ", (dir_ / "hosts.safetensors").string()) : std::string();
    });
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(results[r].exit_code, 0) << results[r].output;
    return bytes("hosts.safetensors");
  }
  testing::TempDir dir_;
};

// mpirun as root (its flag for it), the token exported to the ranks through the environment.
std::string mpirun(int ranks, const std::string& args) {
  return cat("CGDP_CLUSTER_TOKEN=", testing::kJobToken, " timeout -s KILL 120 mpirun --allow-run-as-root "
             "--oversubscribe -np ", ranks, " -x CGDP_CLUSTER_TOKEN ", testing::kCgdp, " train ", args);
}

// Two ranks without --master (both on this host), three with it.
TEST_F(LaunchedJob, MpirunOfTwoAndThreeRanksEqualsTheHostsRun) {
  for (int ranks : {2, 3}) {
    const std::vector<uint8_t> want = with_hosts(ranks);
    const std::vector<int> ports = testing::free_ports(ranks + 1, /*consecutive=*/true);
    // Two ranks find each other without --master: mpirun says both are on this host.
    const std::string master = ranks == 2 ? "" : cat(" --master 127.0.0.1:", ports[0]);
    const testing::CommandResult r =
        testing::run_command(mpirun(ranks, cat(kJob, master, " --shard-port ", ports[1], " --save ",
                                               (dir_ / "mpi.safetensors").string())) +
                             " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(cat("cgdp: Open MPI rank ", ranks - 1, " of ", ranks)), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(cat("of ", ranks, " hosts, ", 2 * ranks, " workers")), std::string::npos) << r.output;
    EXPECT_EQ(bytes("mpi.safetensors"), want) << ranks << " ranks";
  }
}

TEST_F(LaunchedJob, SimulatedSrunEqualsTheHostsRun) {
  const std::vector<uint8_t> want = with_hosts(2);
  const int port = testing::free_ports(2, /*consecutive=*/true)[0];
  // No token yet: rank 0 makes the file, rank 1 waits for it.
  const std::string token = (dir_ / "token").string();
  std::string script;
  for (int r = 0; r < 2; ++r)
    script += cat("{ SLURM_PROCID=", r, " SLURM_LOCALID=", r, " SLURM_NTASKS=2 SLURM_STEP_NODELIST=localhost "
                  "SLURM_STEP_TASKS_PER_NODE=2 timeout -s KILL 120 ",
                  testing::kCgdp, " train ", kJob, " --shard-port ", port, " --token-file ", token,
                  r == 0 ? cat(" --save ", (dir_ / "srun.safetensors").string()) : std::string(), " > ",
                  (dir_ / cat("srun", r, ".log")).string(), " 2>&1; echo $? > ", (dir_ / cat("srun", r, ".rc")).string(),
                  "; } & ");
  testing::run_command(script + "wait");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(testing::read_text(dir_ / cat("srun", r, ".rc")), "0\n") << testing::read_text(dir_ / cat("srun", r, ".log"));
    EXPECT_NE(testing::read_text(dir_ / cat("srun", r, ".log")).find(cat("cgdp: Slurm rank ", r, " of 2")), std::string::npos);
  }
  EXPECT_EQ(bytes("srun.safetensors"), want);
  EXPECT_NE(testing::read_text(dir_ / "srun0.log").find("made the cluster token"), std::string::npos);
  EXPECT_EQ(load_cluster_token(token).size(), 64u);
}

// A task of a step scancel'ed or killed while srun lets the others run (no --kill-on-bad-exit):
// they stop within --timeout-s, naming the host that went.
TEST_F(LaunchedJob, ASimulatedSlurmTaskKilledStopsTheOthersNamingItsHost) {
  const int port = testing::free_ports(3, /*consecutive=*/true)[0];
  // The victim runs unguarded, so that $! is its own pid; the others are killed after 120 s.
  auto task = [&](int r) {
    return cat("SLURM_PROCID=", r, " SLURM_LOCALID=", r, " SLURM_NTASKS=3 SLURM_STEP_NODELIST=localhost "
               "SLURM_STEP_TASKS_PER_NODE=3 CGDP_CLUSTER_TOKEN=", testing::kJobToken,
               r == 1 ? " " : " timeout -s KILL 120 ",
               testing::kCgdp, " train --data synthetic --batch 3 --lr 0.01 --devices 1 --iterations 100000000 "
               "--threads 1 --oversubscribe --plain --display 1 --test-interval -1 --timeout-s 2 --shard-port ",
               port, " > ", (dir_ / cat("task", r, ".log")).string(), " 2>&1");
  };
  const std::string victim_log = (dir_ / "task1.log").string();
  testing::run_command(cat("{ ", task(0), "; } & { ", task(2), "; } & ", task(1), " & victim=$!; ",
                           "for i in $(seq 600); do grep -q '^iter' ", victim_log, " && break; sleep 0.1; done; ",
                           "kill -KILL $victim; wait"));
  // The other survivor may have stopped first (it said bye), so host 1 need not come first.
  for (int r : {0, 2}) {
    const std::string log = testing::read_text(dir_ / cat("task", r, ".log"));
    const size_t error = log.find("cgdp: error: ");
    ASSERT_NE(error, std::string::npos) << log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
    const std::string error_line = log.substr(error, log.find('\n', error) - error);
    EXPECT_NE(error_line.find(cat("host 1 (localhost:", port + 1, ") is gone")), std::string::npos)
        << error_line;
  }
}

// cgdp profile on every host of a job: each measures its own machine, rank r > 0 writing beside
// rank 0's file.
TEST_F(LaunchedJob, ProfilesOfSeveralRanksAreWrittenSideBySide) {
  const std::string out = (dir_ / "p.json").string();
  const testing::CommandResult r = testing::run_command(
      cat("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 ", testing::kCgdp, " profile --data synthetic "
          "--batch 2 --iterations 2 --warmup 1 --repeats 1 -o ", out, " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(cat("cgdp: wrote ", (dir_ / "p.rank1.json").string())), std::string::npos) << r.output;
  EXPECT_EQ(testing::read_text(dir_ / "p.json"), "");  // rank 0's name is left to rank 0
  EXPECT_NE(testing::read_text(dir_ / "p.rank1.json").find("\"layers\""), std::string::npos);
}

TEST(ClusterTokenFile, IsMadeOnceOwnerOnly) {
  testing::TempDir dir;
  const std::string path = (dir / "t").string();
  ASSERT_TRUE(create_cluster_token_file(path));
  const std::string first = load_cluster_token(path);  // refuses a file others may read
  EXPECT_EQ(first.size(), 64u);
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(create_cluster_token_file(path));
  EXPECT_EQ(load_cluster_token(path), first);
  const std::string other = (dir / "u").string();
  ASSERT_TRUE(create_cluster_token_file(other));
  EXPECT_NE(load_cluster_token(other), first);
}

TEST_F(LaunchedJob, ARankKilledUnderMpirunStopsTheJobNamingIt) {
  const std::vector<int> ports = testing::free_ports(4, /*consecutive=*/true);
  const std::string marker = cat("master 127.0.0.1:", ports[0]);  // no leading "--": pgrep reads it
  const std::string log = (dir_ / "mpi.log").string();
  // Rank 1 is killed once the job trains; the others must be gone well before the guard's 120 s.
  const std::string script = cat(
      "{ ", mpirun(3, cat("--data synthetic --batch 3 --lr 0.01 --devices 1 --iterations 100000000 --threads 1 "
                          "--oversubscribe --plain --display 1 --test-interval -1 --timeout-s 2 --", marker,
                          " --shard-port ", ports[1])),
      " > ", log, " 2>&1; echo $? > ", (dir_ / "mpi.rc").string(), "; } & ",
      "for i in $(seq 300); do grep -q '^iter 3/' ", log, " && break; sleep 0.1; done; ",
      "for p in $(pgrep -f '", marker, "'); do grep -qz OMPI_COMM_WORLD_RANK=1 /proc/$p/environ 2>/dev/null && "
      "kill -9 $p; done; start=$(date +%s); wait; echo $(( $(date +%s) - start )) > ",
      (dir_ / "seconds").string());
  testing::run_command(script);
  const std::string output = testing::read_text(log);
  EXPECT_NE(testing::read_text(dir_ / "mpi.rc"), "0\n") << output;
  EXPECT_LT(std::stoi(testing::read_text(dir_ / "seconds")), 30) << output;
  EXPECT_NE(output.find("process rank 1"), std::string::npos) << output;
}

}  // namespace
}  // namespace cgdp
