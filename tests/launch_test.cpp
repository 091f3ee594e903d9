// `cgdp launch` and the pieces around it: ranks on this machine started directly with prefixed
// output, a failing rank stopping the others, remote ranks over an ssh-like command (into network
// namespaces joined by a veth pair, where the machine allows it), the push/pull timeline of a
// multi-host run, and host lists.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgdp/sync/host_list.hpp"
#include "support/loopback_job.hpp"

namespace cgdp {
namespace {

using testing::kCgdp;
using testing::run_command;

const std::string kRun =
    "--data synthetic --threads 1 --plain --test-interval -1 --test-samples 8 --test-batch 8";
const std::string kQuick = kRun + " --batch 3 --iterations 4";

class Launch : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string script(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << "#!/bin/sh\n" << text;
    std::filesystem::permissions(path(name), std::filesystem::perms::owner_all);
    return path(name);
  }
  // 2 hosts x 1 device equal 1 host x 2 devices bit for bit (the same order of sums).
  void expect_two_device_result(const std::string& saved) const {
    const auto r =
        run_command(cat(kCgdp, " train ", kQuick, " --devices 2 --save ", path("one.st"), " 2>&1"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto want = testing::load_tensors(path("one.st"));
    const auto got = testing::load_tensors(saved);
    ASSERT_EQ(want.size(), got.size());
    for (const auto& [name, w] : want)
      EXPECT_EQ(0, std::memcmp(w.data(), got.at(name).data(), w.size() * sizeof(float))) << name;
  }
  testing::TempDir dir_;
};

TEST_F(Launch, RunsOneRankPerLocalHostWithPrefixedOutput) {
  const int base = testing::free_ports(2, true)[0];
  const auto r = run_command(cat("env -u CGDP_CLUSTER_TOKEN timeout -s KILL 120 ", kCgdp,
                                 " launch --hosts localhost,127.0.0.1 --port-base ", base, " -- ",
                                 kQuick, " --save ", path("two.st"), " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(cat("rank 0 on localhost:", base, ", rank 1 on 127.0.0.1:", base + 1)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\n[0] cgdp: done: 4 iterations"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n[1] cgdp: done: 4 iterations"), std::string::npos) << r.output;
  expect_two_device_result(path("two.st"));
}

// Without --threads: the ranks launch starts here share this machine's cores as the devices of
// one process do (each rank cores / local ranks), so the sums run on the same thread counts and
// the bits are those of --devices 2, as the README promises.
TEST_F(Launch, LocalRanksSplitTheCoresAsOneProcessDoes) {
  const std::string flags =
      "--data synthetic --plain --test-interval -1 --test-samples 8 --test-batch 8 --batch 16 "
      "--iterations 6";
  const int base = testing::free_ports(2, true)[0];
  const auto r = run_command(cat("env -u CGDP_CLUSTER_TOKEN OMP_NUM_THREADS=4 timeout -s KILL 120 ",
                                 kCgdp, " launch --hosts localhost,127.0.0.1 --port-base ", base,
                                 " -- ", flags, " --save ", path("two.st"), " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto one = run_command(cat("OMP_NUM_THREADS=4 ", kCgdp, " train ", flags,
                                   " --devices 2 --save ", path("one.st"), " 2>&1"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto want = testing::load_tensors(path("one.st"));
  const auto got = testing::load_tensors(path("two.st"));
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want)
    EXPECT_EQ(0, std::memcmp(w.data(), got.at(name).data(), w.size() * sizeof(float))) << name;
}

// The ssh stand-in fails for rank 1 at once; rank 0 (on this machine, named as the other host
// would name it), which would wait 60 s for rank 1, is stopped.
TEST_F(Launch, FailingRankStopsTheOthers) {
  char self[256] = {};
  ASSERT_EQ(::gethostname(self, sizeof self - 1), 0);
  const std::string ssh =
      script("ssh", "echo \"ssh: Could not resolve hostname $1\" >&2\nexit 255\n");
  const int base = testing::free_ports(2, true)[0];
  const auto r = run_command(cat("timeout -s KILL 30 ", kCgdp,
                                 " launch --hosts ", self, ",nosuchhost --port-base ", base,
                                 " --ssh ", ssh, " -- ", kQuick, " --timeout-s 60 2>&1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[1] ssh: Could not resolve hostname nosuchhost"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(
                "cgdp: error: rank 1 (nosuchhost) exited with status 255; stopped the other ranks"),
            std::string::npos)
      << r.output;
}

// Ranks that `cgdp launch` started here end with it, even when it is killed with SIGKILL (it can
// tell them nothing then): each asked the kernel for SIGTERM on its parent's death. They print
// nothing while they train, so no broken pipe would stop them either.
TEST_F(Launch, KillingTheLauncherEndsItsLocalRanks) {
  const int base = testing::free_ports(2, true)[0];
  const auto r = run_command(cat(
      "out=", path("launch.out"), "; env -u CGDP_CLUSTER_TOKEN ", kCgdp,
      " launch --hosts localhost,127.0.0.1 --port-base ", base, " -- ", kRun,
      " --batch 3 --iterations 1000000 --display 1000000 >$out 2>&1 & L=$!; ",
      "for i in $(seq 300); do [ $(grep -c 'cgdp: placement' $out) = 2 ] && break; sleep 0.1; ",
      "done; sleep 0.5; ",
      "R=$(pgrep -P $L | tr '\\n' ' '); [ -n \"$R\" ] || { echo no ranks; cat $out; exit 2; }; ",
      "kill -9 $L; ",
      // A rank is gone once its /proc entry is gone or a zombie that nobody has reaped yet.
      "for i in $(seq 100); do alive=; for p in $R; do [ -d /proc/$p ] && ",
      "[ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ] && alive=\"$alive $p\"; done; ",
      "[ -z \"$alive\" ] && { echo all ranks ended; exit 0; }; sleep 0.1; done; ",
      "echo still running:$alive; kill -9 $alive; exit 1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "all ranks ended\n");
}

// A rank whose launcher died before it could ask for the signal does not start training alone.
TEST_F(Launch, ARankWhoseLauncherIsGoneDoesNotTrain) {
  const auto r =
      run_command(cat("CGDP_LAUNCHER_PID=999999999 ", kCgdp, " train ", kQuick, " 2>&1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output, "cgdp: error: the launcher (pid 999999999) is gone; not training\n");
}

TEST_F(Launch, RefusesTrainFlagsItSetsItself) {
  const auto r = run_command(cat(kCgdp, " launch --hosts a,b -- ", kQuick, " --rank 1 2>&1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(
      r.output,
      "cgdp: error: launch: leave --rank out of the train flags; launch sets it for each rank\n");
}

// Two network namespaces joined by a veth pair stand for two machines; the ssh stand-in enters
// the namespace of the host it is given, so both ranks are remote and talk over the veth link.
class Namespaces {
 public:
  explicit Namespaces(const std::string& tag) : a_(tag + "a"), b_(tag + "b") {
    ok_ = run_command(cat("{ ip netns add ", a_, " && ip netns add ", b_, " && ip link add ", a_,
                          "v type veth peer name ", b_, "v && ip link set ", a_, "v netns ", a_,
                          " && ip link set ", b_, "v netns ", b_, " && ip -n ", a_,
                          " addr add 10.231.0.1/24 dev ", a_, "v && ip -n ", b_,
                          " addr add 10.231.0.2/24 dev ", b_, "v && ip -n ", a_, " link set ", a_,
                          "v up && ip -n ", b_, " link set ", b_, "v up && ip -n ", a_,
                          " link set lo up && ip -n ", b_, " link set lo up; } 2>&1"));
  }
  ~Namespaces() {
    run_command(cat("ip netns del ", a_, " 2>/dev/null; ip netns del ", b_, " 2>/dev/null"));
  }
  bool ok() const { return ok_.exit_code == 0; }
  const std::string& why() const { return ok_.output; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
  testing::CommandResult ok_;
};

TEST_F(Launch, RanksInTwoNetworkNamespacesOverSsh) {
  const Namespaces ns(cat("cgdp", ::getpid()));
  if (!ns.ok())
    GTEST_SKIP() << "cannot create network namespaces joined by veth here: " << ns.why();
  const std::string ssh =
      script("ssh", cat("case \"$1\" in 10.231.0.1) ns=", ns.a(), ";; 10.231.0.2) ns=", ns.b(),
                        ";; *) exit 255;; esac\nexec ip netns exec $ns sh -c \"$2\"\n"));
  const auto r = run_command(cat("env -u CGDP_CLUSTER_TOKEN timeout -s KILL 120 ", kCgdp,
                                 " launch --hosts 10.231.0.1,10.231.0.2 --ssh ", ssh, " -- ",
                                 kQuick, " --save ", path("ns.st"), " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find("rank 0 on 10.231.0.1:29600 (over ssh), rank 1 on 10.231.0.2:29601 (over ssh)"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[0] cgdp shard: host 1 (10.231.0.2) joined"), std::string::npos)
      << r.output;
  expect_two_device_result(path("ns.st"));
}

// Rank 0's timeline has a push of each chunk and a pull of it every iteration, pushes while its
// worker still computes backward, and each chunk's copy back only after its pull. The overlap is a
// matter of scheduling: under ctest -j2 worker 0's backward once ended each time before the
// aggregator's thread ran, so the job runs up to three times for it; the rest holds on every run.
TEST_F(Launch, TimelineShowsPushesOverlappingBackward) {
  bool overlapped = false;
  for (int run = 0; run < 3 && !overlapped; ++run) {
    const std::string timeline = path(cat("t", run, ".json"));
    testing::LoopbackJob job(dir_, 2,
                             cat(kRun, " --batch 48 --iterations 5 --timeline ", timeline));
    const auto ranks = job.run_all();
    ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].output;
    ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].output;
    ASSERT_TRUE(std::filesystem::exists(path(cat("t", run, ".rank1.json"))));
    const auto trace = nlohmann::json::parse(testing::read_text(timeline))["traceEvents"];
    std::vector<nlohmann::json> push, pull, backward, h2d;
    for (const auto& e : trace) {
      if (e["ph"] != "X") continue;
      const std::string category = e["cat"];
      if (category == "push") push.push_back(e);
      if (category == "pull") pull.push_back(e);
      if (category == "backward" && e["pid"] == 0) backward.push_back(e);
      if (category == "h2d" && e["pid"] == 0) h2d.push_back(e);
    }
    EXPECT_EQ(push.size(), 5u * 4);  // 5 iterations x 4 chunks of fashion_cnn
    EXPECT_EQ(pull.size(), push.size());
    auto end = [](const nlohmann::json& e) {
      return e["ts"].get<int64_t>() + e["dur"].get<int64_t>();
    };
    overlapped = std::any_of(push.begin(), push.end(), [&](const nlohmann::json& p) {
      return std::any_of(backward.begin(), backward.end(), [&](const nlohmann::json& b) {
        return b["ts"] <= p["ts"] && p["ts"] < end(b);
      });
    });
    for (const auto& p : pull) {  // the h2d copy of the same chunk that follows the pull
      const auto next = std::find_if(h2d.begin(), h2d.end(), [&](const nlohmann::json& h) {
        return h["args"]["chunk"] == p["args"]["chunk"] && h["ts"] >= p["ts"];
      });
      ASSERT_NE(next, h2d.end()) << p.dump();
      EXPECT_GE((*next)["ts"].get<int64_t>(), end(p)) << p.dump();
    }
  }
  EXPECT_TRUE(overlapped) << "no push happened while worker 0 computed backward, in 3 runs";
}

TEST(HostList, ParsesHostsAndPorts) {
  const auto hosts = parse_host_list({"a:1", "b.example:65535", "10.0.0.3:7"});
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[1].host, "b.example");
  EXPECT_EQ(hosts[1].port, 65535);
  EXPECT_EQ(hosts[2].text(), "10.0.0.3:7");
  const auto launched = parse_host_list({"a", "b:99", "c"}, [](int rank) { return 500 + rank; });
  EXPECT_EQ(launched[0].port, 500);
  EXPECT_EQ(launched[1].port, 99);
  EXPECT_EQ(launched[2].port, 502);
}

TEST(HostList, BadEntriesAreNamed) {
  auto fails = [](std::vector<std::string> items, const std::string& part) {
    try {
      parse_host_list(items);
      ADD_FAILURE() << "accepted " << items.back();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  fails({"a:1", "b"}, "'b' has no port");
  fails({"a:0"}, "'a:0' needs a port in 1..65535 (for rank 0)");
  fails({"a:1", "b:x1"}, "'b:x1' needs a port in 1..65535 (for rank 1)");
  fails({":5"}, "':5' has no host name");
  fails({"a:1", "a:1"}, "a:1 is given twice");
  fails({}, "no hosts given");
}

TEST(HostList, ResolvesProbesAndRecognisesThisMachine) {
  EXPECT_EQ(resolve_ipv4("localhost"), "127.0.0.1");
  EXPECT_EQ(resolve_ipv4("10.1.2.3"), "10.1.2.3");
  EXPECT_THROW(resolve_ipv4("no-such-host.invalid"), UsageError);
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_FALSE(is_local_host("10.231.0.9"));
  check_loopback_alone(parse_host_list({"localhost:1", "127.0.0.1:2"}));
  EXPECT_THROW(check_loopback_alone(parse_host_list({"localhost:1", "10.231.0.9:2"})), UsageError);
  const int closed = testing::free_ports(1)[0];
  EXPECT_EQ(probe_tcp("127.0.0.1", closed, std::chrono::seconds(1)), "Connection refused");
}

}  // namespace
}  // namespace cgdp
