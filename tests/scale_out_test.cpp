// Multi-host training as real `cgdp train` processes on loopback: H hosts x N devices give the
// parameters of 1 host x H·N devices (bit for bit when N is a power of two, as the summation
// order is then the same, or when every sum is exact; within 1e-5 on fashion_cnn otherwise),
// BatchNorm statistics included; the 16-bit exchange rounds the global sum once; sufficient
// factors are gathered across hosts and rebuild one host's sum; a resumed job
// continues bit for bit; a killed host stops the others with an error naming it; a wrong token and
// mismatched flags are refused with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "support/loopback_job.hpp"

namespace cgdp {
namespace {

using testing::LoopbackJob;
using testing::RankResult;
using Tensors = std::map<std::string, std::vector<float>>;

// Short runs: one compute thread (the same OpenMP reductions in every process), tests only at
// the end on a few samples.
const std::string kQuick =
    "--threads 1 --oversubscribe --plain --display 1 --test-interval -1 --test-samples 8 "
    "--test-batch 8";

// A linear classifier whose gradients are exact: with zero weights and a learning rate of 2^-40
// the logits stay below 2^-30, so the softmax is exactly 1/4 and every gradient a short dyadic
// fraction of the data (pixels are k/256): every order of summing gives the same bits. Its
// BatchNorm reads the data only, so its running statistics are exact sums too.
const char* kExactNet = R"(name: "ExactLinear"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 4 dim: 2 dim: 4 dim: 4 } shape { dim: 4 } } }
layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
const std::string kExactFlags =
    "--data synthetic:2,4,4,4 --batch 4 --iterations 10 --lr 9.094947017729282379150390625e-13";
const std::string kFashionFlags = "--data synthetic --batch 3 --lr 0.01";

class ScaleOut : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  // One host with `devices` devices; its output must end well.
  Tensors single_host(const std::string& flags, int devices) const {
    const auto r =
        testing::run_command(cat(testing::kCgdp, " train ", flags, " ", kQuick, " --devices ",
                                 devices, " --save ", path("single.safetensors"), " 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return testing::load_tensors(path("single.safetensors"));
  }
  // H hosts of `devices` devices; every rank must end well; rank 0 saves (and its output goes to
  // `log`, when given).
  Tensors multi_host(const std::string& flags, int hosts, int devices,
                     std::string* log = nullptr) const {
    LoopbackJob job(dir_, hosts, cat(flags, " ", kQuick, " --devices ", devices));
    const auto ranks = job.run_all(
        [&](int r) { return r == 0 ? " --save " + path("multi.safetensors") : std::string(); });
    for (int r = 0; r < hosts; ++r)
      EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_NE(
        ranks[hosts - 1].output.find(cat("of ", hosts, " hosts, ", hosts * devices, " workers")),
        std::string::npos)
        << ranks[hosts - 1].output;
    if (log) *log = ranks[0].output;
    return testing::load_tensors(path("multi.safetensors"));
  }
  testing::TempDir dir_;
};

void expect_same_bits(const Tensors& want, const Tensors& got) {
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    ASSERT_EQ(got.at(name).size(), w.size()) << name;
    EXPECT_EQ(0, std::memcmp(w.data(), got.at(name).data(), w.size() * sizeof(float))) << name;
  }
}

void expect_close(const Tensors& want, const Tensors& got, double tolerance) {
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    const auto& g = got.at(name);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      diff += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
      norm += static_cast<double>(w[i]) * w[i];
    }
    EXPECT_LE(std::sqrt(diff / norm), tolerance) << name;
  }
}

// Three devices per host: the hosts' sums are not subtrees of one host's summation tree over six
// workers, so only exact data gives the same bits.
TEST_F(ScaleOut, TwoHostsOfThreeDevicesEqualOneHostOfSixBitForBitOnExactData) {
  const std::string flags = cat("--model ", write("exact.prototxt", kExactNet), " ", kExactFlags);
  const Tensors want = single_host(flags, 6);
  ASSERT_TRUE(want.count("bn/state/0") && want.count("ip/0"));
  EXPECT_NE(want.at("ip/0")[0], 0.f);  // it trained
  expect_same_bits(want, multi_host(flags, 2, 3));
}

// Two devices per host: every host's sum is a subtree of one host's tree over all workers (pairs
// first, then pairs of pairs, ...) and the shards add the hosts' sums as the rest of that tree,
// so any model gives the same bits.
TEST_F(ScaleOut, TwoHostsOfTwoDevicesEqualOneHostOfFourBitForBitOnFashionCnn) {
  const std::string flags = kFashionFlags + " --iterations 10";
  expect_same_bits(single_host(flags, 4), multi_host(flags, 2, 2));
}

TEST_F(ScaleOut, ThreeHostsOfTwoDevicesEqualOneHostOfSixBitForBitOnFashionCnn) {
  const std::string flags = kFashionFlags + " --iterations 10";
  expect_same_bits(single_host(flags, 6), multi_host(flags, 3, 2));
}

// Three devices per host: ((g0 + g1) + g2) + ((g3 + g4) + g5) against one host's
// ((g0 + g1) + (g2 + g3)) + (g4 + g5); the last bits differ, 2e-7 after 10 iterations.
TEST_F(ScaleOut, TwoHostsOfThreeDevicesMatchOneHostOfSixOnFashionCnn) {
  const std::string flags = kFashionFlags + " --iterations 10";
  expect_close(single_host(flags, 6), multi_host(flags, 2, 3), 1e-5);
}

// The 16-bit exchange across hosts: each host sums its workers' widened copies in fp32, the shards
// add the hosts' fp32 sums, and every host narrows the global sum once. In bf16, two devices per
// host give the bits of one host of four (one fp32 tree, rounded once; a host that rounded its own
// sum would differ). fp16's scale comes from the global sum's largest value rather than from the
// workers' scales, which only moves values near fp16's underflow.
TEST_F(ScaleOut, SixteenBitExchangeAcrossHostsRoundsTheGlobalSumOnce) {
  const std::string flags = kFashionFlags + " --iterations 10 --exchange-dtype ";
  expect_same_bits(single_host(flags + "bf16", 4), multi_host(flags + "bf16", 2, 2));
  const Tensors fp32 = single_host(kFashionFlags + " --iterations 10", 4);
  const Tensors fp16 = single_host(flags + "fp16", 4);
  const Tensors fp16_hosts = multi_host(flags + "fp16", 2, 2);
  expect_close(fp16, fp16_hosts, 1e-5);
  expect_close(fp32, fp16_hosts, 1e-2);
  EXPECT_NE(0, std::memcmp(fp32.at("conv1/0").data(), fp16_hosts.at("conv1/0").data(),
                           fp32.at("conv1/0").size() * sizeof(float)));  // fp16 was used
}

// Sufficient factors across hosts: each host's block of rows goes through the shards to the
// others (a gather, no sum), and every worker rebuilds from all four workers' rows in the order one
// host of four has them: the same bits as that host, in fp32 and in bf16. A host that skipped the
// gather, or put the blocks in another order, would rebuild another sum.
TEST_F(ScaleOut, FactorsAcrossHostsRebuildTheSumOfOneHostBitForBit) {
  const std::string flags = kFashionFlags + " --iterations 10 --fc-exchange factors";
  std::string log;
  expect_same_bits(single_host(flags, 4), multi_host(flags, 2, 2, &log));
  EXPECT_NE(log.find("fully-connected exchange: ip2, ip1 as factors, --fc-exchange factors"),
            std::string::npos)
      << log;
  const std::string bf16 = flags + " --exchange-dtype bf16";
  expect_same_bits(single_host(bf16, 4), multi_host(bf16, 2, 2));
  // fp16: the factors keep each worker's scales; the dense chunks' sum is scaled as a global one.
  const std::string fp16 = flags + " --exchange-dtype fp16";
  expect_close(single_host(fp16, 4), multi_host(fp16, 2, 2), 1e-5);
}

// Rank 0 writes the checkpoints; every rank resumes from the same file and the job ends exactly
// where the uninterrupted one did.
TEST_F(ScaleOut, ResumedJobContinuesBitForBit) {
  const std::string flags =
      cat(kFashionFlags, " ", kQuick, " --iterations 6 --snapshot-every 3 --snapshot-prefix ",
          path("ckpt/job"));
  LoopbackJob whole(dir_, 2, flags);
  auto ranks = whole.run_all(
      [&](int r) { return r == 0 ? " --save " + path("whole.safetensors") : std::string(); });
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].output;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].output;
  std::vector<std::string> written;  // by rank 0 only
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "ckpt"))
    written.push_back(e.path().filename());
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written, (std::vector<std::string>{"job_iter_3.ckpt", "job_iter_6.ckpt"}));
  LoopbackJob resumed(dir_, 2, flags + " --resume " + path("ckpt/job_iter_3.ckpt"));
  ranks = resumed.run_all(
      [&](int r) { return r == 0 ? " --save " + path("resumed.safetensors") : std::string(); });
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].output;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].output;
  EXPECT_NE(ranks[1].output.find("resumed from"), std::string::npos) << ranks[1].output;
  expect_same_bits(testing::load_tensors(path("whole.safetensors")),
                   testing::load_tensors(path("resumed.safetensors")));
}

// The error line of a rank that failed: exactly one "cgdp: error: " line.
std::string error_line(const RankResult& r) {
  std::string found;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("cgdp: error: ", 0) == 0) {
      EXPECT_TRUE(found.empty()) << "two error lines:\n" << r.output;
      found = line;
    }
  EXPECT_EQ(r.exit_code, 1) << r.output;
  return found;
}

TEST_F(ScaleOut, HostThatDoesNotResumeIsRefusedNamingIt) {
  LoopbackJob first(dir_, 2,
                    cat(kFashionFlags, " ", kQuick,
                        " --iterations 2 --snapshot-every 2 --snapshot-prefix ", path("c")));
  ASSERT_EQ(first.run_all()[0].exit_code, 0);
  LoopbackJob job(dir_, 2, cat(kFashionFlags, " ", kQuick, " --iterations 4 --timeout-s 20"));
  const auto ranks = job.run_all(
      [&](int r) { return r == 0 ? " --resume " + path("c_iter_2.ckpt") : std::string(); });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(
        error_line(ranks[r]).find(cat("hosts disagree on the start iteration: host 1 (",
                                      job.host(1), ") has 0, host 0 (", job.host(0), ") has 2")),
        std::string::npos)
        << ranks[r].output;
}

// Settings that change the math were not compared: such ranks trained to the end with diverged
// replicas. Each is now part of the start agreement and named when a host differs.
TEST_F(ScaleOut, MismatchedLearningSettingsAreRefusedNamingTheSetting) {
  struct Case {
    std::string rank1_flags, error;
  };
  const std::vector<Case> cases = {
      {"--data synthetic --lr 0.02", "hosts disagree on the base learning rate (--lr): host 1 ("},
      {"--data synthetic --lr 0.01 --momentum 0.5",
       "hosts disagree on the momentum (--momentum): "},
      {"--data synthetic --lr 0.01 --weight-decay 0.1", "hosts disagree on the weight decay"},
      {"--data synthetic --lr 0.01 --lr-policy step --stepsize 2",
       "hosts disagree on the learning-rate schedule (--lr-policy and its settings): host 1 ("},
      {"--data synthetic:1,28,28,9 --lr 0.01", "hosts disagree on the training data: host 1 ("},
      {"--data synthetic --lr 0.01 --exchange-dtype bf16",
       "hosts disagree on the exchange dtype (--exchange-dtype): host 1 ("}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.rank1_flags);
    LoopbackJob job(dir_, 2, cat(kQuick, " --batch 3 --iterations 4 --timeout-s 20"));
    const auto ranks = job.run_all([&](int r) {
      return r == 0 ? std::string(" --data synthetic --lr 0.01") : " " + c.rank1_flags;
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_NE(error_line(ranks[r]).find(c.error), std::string::npos) << ranks[r].output;
  }
  LoopbackJob job(dir_, 2, cat(kQuick, " --batch 3 --iterations 4 --timeout-s 20"));
  const auto ranks = job.run_all(
      [](int r) { return r == 0 ? " --data synthetic --lr 0.02" : " --data synthetic --lr 0.01"; });
  EXPECT_NE(error_line(ranks[0]).find(
                cat("host 1 (", job.host(1), ") has 0.01, host 0 (", job.host(0), ") has 0.02")),
            std::string::npos)
      << ranks[0].output;
}

// The tokens differ, so each host finds that the other's shard cannot prove it holds its token.
// Which host stops first is a race (it takes its shard with it, and the other host may then see
// no answer), so: some host names the failed proof, and each host stops naming the other's shard.
TEST_F(ScaleOut, WrongTokenIsRefused) {
  LoopbackJob job(dir_, 2, cat(kFashionFlags, " ", kQuick, " --iterations 4 --timeout-s 3"));
  const auto ranks = job.run(cat("{ ", job.command(0), "; echo $? > rank_0.rc; } & { ",
                                 job.command(1, "", "another-token-0123456789"),
                                 "; echo $? > rank_1.rc; } & wait"));
  const std::string both = ranks[0].output + ranks[1].output;
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(error_line(ranks[r]).find(cat("shard ", 1 - r, " (tcp://", job.host(1 - r), ")")),
              std::string::npos)
        << ranks[r].output;
  EXPECT_NE(both.find(") did not prove that it holds this cluster's token"), std::string::npos)
      << both;
}

// Rank 1 is killed by SIGKILL once it trains; ranks 0 and 2 stop within their 2-second timeout
// (or at once, when they see the connection drop) with an error that names host 1.
TEST_F(ScaleOut, KilledHostStopsTheOthersWithAnErrorNamingIt) {
  LoopbackJob job(dir_, 3, cat(kFashionFlags, " ", kQuick, " --iterations 1000000 --timeout-s 2"));
  const std::string survivors = cat("{ ", job.command(0), "; echo $? > rank_0.rc; } & { ",
                                    job.command(2), "; echo $? > rank_2.rc; } & ");
  const std::string victim = cat(
      job.command(1, "", testing::kJobToken, false),
      " & victim=$!; for i in $(seq 600); do grep -q '^iter' ", job.log(1),
      " && break; sleep 0.1; done; kill -KILL $victim; wait $victim; echo $? > rank_1.rc; wait");
  const auto ranks = job.run(survivors + victim);
  ASSERT_NE(ranks[1].output.find("iter "), std::string::npos) << "rank 1 never trained:\n"
                                                              << ranks[1].output;
  for (int r : {0, 2})
    EXPECT_NE(error_line(ranks[r]).find(cat("host 1 (", job.host(1), ") is gone")),
              std::string::npos)
        << ranks[r].output;
}

TEST_F(ScaleOut, BadScaleOutFlagsGiveOneLine) {
  const std::string base =
      cat(testing::kCgdp, " train ", kFashionFlags, " --hosts 127.0.0.1:1,127.0.0.1:2 ");
  auto one_line = [](const std::string& command, const std::string& part) {
    const auto r = testing::run_command(command + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output.rfind("cgdp: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
  };
  one_line(base + "--rank 2", "--rank 2 is outside the 2 hosts of --hosts");
  one_line(base + "--sync ps0", "--hosts needs --sync cgdp");
  one_line("env -u CGDP_CLUSTER_TOKEN " + base + "--rank 0", "no cluster token");
  one_line(cat(testing::kCgdp, " train ", kFashionFlags, " --hosts 127.0.0.1:1,127.0.0.1"),
           "'127.0.0.1' has no port");
  one_line(cat(testing::kCgdp, " train ", kFashionFlags, " --hosts 127.0.0.1:1,127.0.0.1:1"),
           "127.0.0.1:1 is given twice");
}

}  // namespace
}  // namespace cgdp
