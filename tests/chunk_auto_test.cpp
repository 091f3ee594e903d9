// `cgdp train --chunk auto` on a tiny model: it measures a profile (or reads one), logs every
// trial, settles within its budget and prints a --chunk value that works; a run that searched
// gives the same parameters, bit for bit, as one on a fixed plan; bad input gives one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "cgdp/train/trainer.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_chunk_model.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

testing::CommandResult cgdp_run(const std::string& args) {
  return testing::run_command(cat(testing::binary_dir(), "/cgdp ", args, " 2>&1"));
}

// What follows `prefix` on its line in `text`; empty when absent.
std::string after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return "";
  const size_t begin = at + prefix.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ChunkAuto : public ::testing::Test {
 protected:
  std::string train_args(const std::string& more) const {
    return cat("train -m ", model_, " -d synthetic:1,8,8,10 --devices 2 --plain --test-interval -1",
               " --test-samples 8 --test-batch 8 ", more);
  }
  testing::TempDir dir_;
  std::string model_ = testing::write_tiny_chunk_model(dir_.path());
  std::string profile_ = testing::write_tiny_chunk_profile(dir_.path());
};

TEST_F(ChunkAuto, MeasuresAProfileSearchesAndPrintsAPlanToPaste) {
  const auto r = cgdp_run(train_args(
      "--iterations 40 --chunk auto --search-interval 4 --search-warmup 1 --search-budget 28"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cgdp: chunk search (profile measured in "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cgdp: chunk search: trial 1: --chunk "), std::string::npos) << r.output;
  const int trials = count(r.output, "cgdp: chunk search: trial ");
  EXPECT_GE(trials, 2) << r.output;
  EXPECT_EQ(trials, count(r.output, " ms: kept\n") + count(r.output, " ms: rejected\n") +
                        count(r.output, " ms: confirmed\n") + count(r.output, " ms: overturned\n"))
      << "a trial line without its verdict\n"
      << r.output;
  const std::string settled = after(r.output, "cgdp: chunk search settled after ");
  ASSERT_FALSE(settled.empty()) << r.output;
  EXPECT_LE(std::stoi(settled), 28) << "settled beyond --search-budget";
  EXPECT_NE(settled.find("the search cost about "), std::string::npos) << settled;
  const std::string chosen = after(r.output, "cgdp: chosen plan: --chunk ");
  ASSERT_FALSE(chosen.empty()) << r.output;
  EXPECT_NE(r.output.find("cgdp: done: 40 iterations"), std::string::npos) << r.output;
  // The printed value is a plan the trainer takes as it is.
  const auto again = cgdp_run(train_args("--iterations 2 --chunk " + chosen));
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

TEST_F(ChunkAuto, StartsFromTheProfilesPredictedBest) {
  // The profile makes each sync point cost 1 ms: the single chunk is predicted best.
  const auto r =
      cgdp_run(train_args("--iterations 12 --chunk auto --search-interval 3 --search-warmup 1 "
                          "--search-budget 12 --search-confirmations 1 --profile " +
                          profile_));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(cat("cgdp: chunk search (profile ", profile_,
                              ") over 3 plans, fine to coarse: 1 2 all; "
                              "starts at the predicted best --chunk all")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cgdp: chunk search: trial 1: --chunk all (1 chunk)"), std::string::npos)
      << r.output;
}

TEST_F(ChunkAuto, ARunThatSearchedHasTheBitsOfAFixedPlanRun) {
  TrainConfig c;
  c.model = model_;
  c.data = "synthetic:1,8,8,10";
  c.devices = 3;
  c.iterations = 30;
  c.test_interval = -1;
  c.test_samples = 8;
  c.test_batch = 8;
  c.plain_output = true;
  c.solver.set_base_lr(0.05f);
  c.solver.set_momentum(0.9f);
  const std::string log_path = (dir_ / "auto.log").string();
  FILE* sink = std::fopen("/dev/null", "w");
  FILE* log = std::fopen(log_path.c_str(), "w");
  c.chunk = "layer";
  Trainer fixed(c, sink);
  fixed.run();
  c.chunk = "auto";
  c.profile_path = profile_;
  c.chunk_search.interval = 3;
  c.chunk_search.warmup = 1;
  Trainer searching(c, log);
  searching.run();
  std::fclose(sink);
  std::fclose(log);
  std::ostringstream text;
  text << std::ifstream(log_path).rdbuf();
  EXPECT_GE(count(text.str(), "chunk search: trial "), 3) << "the search did not switch plans\n"
                                                          << text.str();
  const auto values = [](Net<float>& net) {
    std::vector<float> v(net.learnable_count());
    net.device().copy(v.data(), net.flat_data().data(), v.size() * sizeof(float));
    return v;
  };
  const std::vector<float> expected = values(fixed.net());
  for (int w = 0; w < searching.num_workers(); ++w)
    EXPECT_TRUE(values(searching.worker_net(w)) == expected)
        << "worker " << w << " differs from the fixed-plan run";
}

// Exactly one line "cgdp: error: ..." with every part, and exit 1.
void expect_error(const std::string& args, std::initializer_list<std::string> parts) {
  const auto r = cgdp_run(args);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("cgdp: error: ", 0), 0u) << r.output;
  for (const auto& part : parts)
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
}

TEST_F(ChunkAuto, BadInputGivesOneLine) {
  const std::string with_profile = train_args("--iterations 4 --chunk auto --profile " + profile_);
  expect_error(with_profile + " --chunk-plans equal bogus",
               {"--chunk-plans: 'bogus' is not a plan", "'best'"});
  expect_error(with_profile + " --chunk-plans 0,2",
               {"--chunk-plans: --chunk '0,2'", "out of range"});
  expect_error(with_profile + " --search-interval 0",
               {"--search-interval: expected iterations per trial"});
  expect_error(with_profile + " --search-budget 10",
               {"--search-budget: 10 iterations cannot hold"});
  expect_error(with_profile + " --sync ps0",
               {"--chunk auto searches cgdp's chunk plans; --sync ps0 has none"});
  expect_error(train_args("--iterations 4 --chunk auto --profile " + (dir_ / "none.json").string()),
               {(dir_ / "none.json").string()});
  expect_error(
      cat("train -m fashion_cnn -d synthetic --devices 2 --iterations 4 --chunk auto --profile ",
          profile_),
      {profile_, "does not match the model"});
}

}  // namespace
}  // namespace cgdp
