// tools/chunk_tuner: simulate mode on a hand-written profile (table, best lines, the SVG with
// both series), a short real sweep, and bad input (unknown plans, zero interval, bad plot name).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_chunk_model.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

testing::CommandResult tuner(const std::string& args) {
  return testing::run_command(
      cat(testing::binary_dir(), "/tools/chunk_tuner/chunk_tuner ", args, " 2>&1"));
}

std::string read_text(const std::filesystem::path& path) {
  std::ostringstream out;
  out << std::ifstream(path).rdbuf();
  return out.str();
}

// The table row of plan `spec`, split at blanks; empty when there is none.
std::vector<std::string> row(const std::string& output, const std::string& spec) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string w; words >> w;) fields.push_back(w);
    if (!fields.empty() && fields[0] == spec) return fields;
  }
  return {};
}

// Line index of plan `spec`'s row.
size_t row_position(const std::string& output, const std::string& spec) {
  return output.find("\n" + spec + " ");
}

class ChunkTuner : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::string model_ = testing::write_tiny_chunk_model(dir_.path());
  std::string profile_ = testing::write_tiny_chunk_profile(dir_.path());
};

TEST_F(ChunkTuner, SimulatesEveryPlanOfTheSetAndPlotsThem) {
  const std::string svg = (dir_ / "sweep.svg").string();
  const auto r = tuner(cat("--simulate --profile ", profile_, " -m ", model_,
                           " --plans equal best all --plot ", svg));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Three param layers: K = 1 (three chunks), K = 2 (two) and the single chunk, fine to coarse;
  // 'best' is the single chunk (1 ms per sync point), and K = 3 repeats K = 1.
  EXPECT_EQ(row(r.output, "plan"),
            (std::vector<std::string>{"plan", "chunks", "size", "median", "ms", "min", "ms", "max",
                                      "ms", "predicted", "ms"}));
  using Row = std::vector<std::string>;
  const Row k1 = row(r.output, "1"), k2 = row(r.output, "2"), all = row(r.output, "all");
  ASSERT_EQ(k1.size(), 7u) << r.output;
  ASSERT_EQ(k2.size(), 7u) << r.output;
  ASSERT_EQ(all.size(), 7u) << r.output;
  EXPECT_EQ(Row(k1.begin(), k1.end() - 1), (Row{"1", "3", "1.00", "-", "-", "-"}));
  EXPECT_EQ(Row(k2.begin(), k2.end() - 1), (Row{"2", "2", "1.50", "-", "-", "-"}));
  EXPECT_EQ(Row(all.begin(), all.end() - 1), (Row{"all", "1", "3.00", "-", "-", "-"}));
  // Each sync point costs 1 ms: fewer chunks, faster.
  EXPECT_GT(std::stod(k1[6]), std::stod(k2[6]) + 0.9);
  EXPECT_GT(std::stod(k2[6]), std::stod(all[6]) + 0.9);
  EXPECT_LT(row_position(r.output, "1"), row_position(r.output, "2"));
  EXPECT_LT(row_position(r.output, "2"), row_position(r.output, "all"));
  EXPECT_TRUE(row(r.output, "3").empty()) << "a repeated plan was listed twice\n" << r.output;
  EXPECT_NE(r.output.find("best predicted: --chunk all"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("best measured"), std::string::npos) << r.output;
  const std::string text = read_text(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("predicted"), std::string::npos) << "the predicted series is not in the SVG";
  EXPECT_NE(text.find("chunk size"), std::string::npos);
  EXPECT_EQ(text.find("measured: median"), std::string::npos)
      << "simulate mode plotted measurements";
}

TEST_F(ChunkTuner, MeasuresShortRealRunsOfEachPlan) {
  const std::string svg = (dir_ / "measured.svg").string();
  const auto r =
      tuner(cat("-m ", model_, " -d synthetic:1,8,8,10 --devices 2 --plans layer all",
                " --interval 3 --warmup 1 --rounds 2 --profile ", profile_, " --plot ", svg));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measuring 2 plans: 2 rounds of 3 iterations each (1 dropped)"),
            std::string::npos)
      << r.output;
  const std::vector<std::string> layer = row(r.output, "layer");
  ASSERT_EQ(layer.size(), 7u) << r.output;
  EXPECT_EQ(layer[1], "3");
  EXPECT_GT(std::stod(layer[3]), 0) << "median ms";
  EXPECT_LE(std::stod(layer[4]), std::stod(layer[3])) << "min <= median";
  EXPECT_LE(std::stod(layer[3]), std::stod(layer[5])) << "median <= max";
  EXPECT_NE(r.output.find("best measured: --chunk "), std::string::npos) << r.output;
  const std::string text = read_text(svg);
  EXPECT_NE(text.find("measured: median, min..max"), std::string::npos);
  EXPECT_NE(text.find("predicted"), std::string::npos);
}

// Exactly one line "chunk_tuner: error: ..." with every part, and exit 1.
void expect_error(const std::string& args, std::initializer_list<std::string> parts) {
  const auto r = tuner(args);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("chunk_tuner: error: ", 0), 0u) << r.output;
  for (const auto& part : parts)
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
}

TEST_F(ChunkTuner, BadInputGivesOneLine) {
  const std::string sim = cat("--simulate --profile ", profile_, " -m ", model_);
  expect_error(sim + " --plans equal bogus", {"--plans: 'bogus' is not a plan", "'equal:A-B'"});
  expect_error(sim + " --plans equal:3-1", {"--plans: 'equal:3-1'", "1 <= A <= B"});
  expect_error(sim + " --plans 0,5", {"--plans: --chunk '0,5'", "out of range"});
  expect_error(sim + " --interval 0", {"--interval: expected at least 1"});
  expect_error(sim + " --warmup 10", {"--warmup", "(--interval)"});
  expect_error(sim + " --plot out.pdf", {"--plot 'out.pdf'", ".svg or .png"});
  expect_error(cat("--simulate -m ", model_), {"--simulate needs --profile"});
  expect_error(cat("--plans best -m ", model_, " -d synthetic:1,8,8,10 --devices 2"),
               {"--plans: 'best' needs a profile"});
  expect_error(cat("--simulate --profile ", profile_, " -m fashion_cnn"),
               {profile_, "does not match the model"});
}

}  // namespace
}  // namespace cgdp
