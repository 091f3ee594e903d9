// The convolution algorithm table: keyed by GPU model (two devices of one model share a choice),
// searched once per key, written to and read from text, stored in checkpoints and loaded by a
// resume before any forward, so a resumed run keeps the algorithms (and bits) it ran with.
#include "cgdp/device/conv_algorithm_table.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;

const std::string kH100 = "NVIDIA H100 80GB HBM3 sm_90 cuDNN 91002";

TEST(ConvAlgorithmTable, OneSearchPerKeyAndTheGpuModelNotItsIndexIsTheKey) {
  ConvAlgorithmTable table;
  int searches = 0;
  const ConvChoiceKey key{kH100, 0, {4, 64, 3, 224, 224, 64, 3, 3}};
  // Workers on cuda:0 and cuda:3, both H100s, build the same key and run the same algorithm.
  EXPECT_EQ(table.find_or_search(key, [&] { ++searches; return ConvChoice{6, 1 << 20, 1}; }),
            (ConvChoice{6, 1 << 20, 1}));
  EXPECT_EQ(table.find_or_search(key, [&] { ++searches; return ConvChoice{1, 0, 1}; }),
            (ConvChoice{6, 1 << 20, 1}));
  EXPECT_EQ(searches, 1);
  // Another pass, another GPU model: searched anew.
  table.find_or_search({kH100, 1, key.problem}, [&] { ++searches; return ConvChoice{0, 0, 1}; });
  table.find_or_search({"NVIDIA A100-SXM4-80GB sm_80 cuDNN 91002", 0, key.problem},
                       [&] { ++searches; return ConvChoice{1, 0, 1}; });
  EXPECT_EQ(searches, 3);
  EXPECT_EQ(table.size(), 3u);
}

TEST(ConvAlgorithmTable, TextRoundTripsAndPinsTheChoices) {
  ConvAlgorithmTable a;
  a.find_or_search({kH100, 0, {4, 3, 32}}, [] { return ConvChoice{6, 4096, 1}; });
  a.find_or_search({kH100, 2, {-1, 4, 3, 32}}, [] { return ConvChoice{1, 0, 2}; });
  ConvAlgorithmTable b;
  b.merge_text(a.to_text(), "run_iter_5.ckpt");
  EXPECT_EQ(b.to_text(), a.to_text());
  // A loaded choice is used without a search, even where this process would have chosen another.
  EXPECT_EQ(b.find_or_search({kH100, 0, {4, 3, 32}}, [] { return ConvChoice{0, 0, 0}; }),
            (ConvChoice{6, 4096, 1}));
  // A loaded table overrides a choice made before it (the resumed run repeats the old one).
  ConvAlgorithmTable c;
  c.find_or_search({kH100, 0, {4, 3, 32}}, [] { return ConvChoice{0, 0, 0}; });
  c.merge_text(a.to_text(), "x");
  EXPECT_EQ(c.find_or_search({kH100, 0, {4, 3, 32}}, [] { return ConvChoice{0, 0, 0}; }),
            (ConvChoice{6, 4096, 1}));
}

TEST(ConvAlgorithmTable, BadTextNamesTheFileAndLineAndChangesNothing) {
  ConvAlgorithmTable t;
  const std::string good = cat(kH100, "\t0\t4,3\t6\t0\t1\n");
  const auto error_of = [&](const std::string& text) {
    try {
      t.merge_text(text, "a.ckpt");
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(error_of(good + kH100 + "\t0\t4,3\t6\t0\n"),
              HasSubstr("a.ckpt: convolution algorithms, line 2: expected 6 tab-separated fields"));
  EXPECT_THAT(error_of(good + kH100 + "\t0\t4,x\t6\t0\t1\n"),
              HasSubstr("line 2: problem value 'x' is not an integer"));
  EXPECT_THAT(error_of(cat(kH100, "\t0\t4\t6\t-5\t1\n")), HasSubstr("line 1: "));
  EXPECT_EQ(t.size(), 0u);  // the good first line was not taken either
}

// A short fashion_cnn run on the CPU (which chooses no convolution algorithms itself).
TrainConfig short_run(int iterations) {
  TrainConfig c;
  c.model = "fashion_cnn";
  c.data = "synthetic";
  c.batch = 4;
  c.test_batch = 4;
  c.test_samples = 4;
  c.test_interval = -1;
  c.iterations = iterations;
  c.plain_output = true;
  c.solver.set_base_lr(0.01f);
  return c;
}

TEST(ConvAlgorithmTable, ACheckpointCarriesTheTableAndAResumeLoadsIt) {
  const auto dir = std::filesystem::temp_directory_path() / cat("cgdp_conv_table_", ::getpid());
  std::filesystem::create_directories(dir);
  TrainConfig c = short_run(2);
  c.snapshot_every = 2;
  c.snapshot_prefix = (dir / "run").string();
  FILE* sink = std::fopen("/dev/null", "w");
  ConvAlgorithmTable& process = ConvAlgorithmTable::process();
  process.clear();
  // What a CUDA run would have chosen (the CPU backend chooses none).
  process.find_or_search({kH100, 0, {4, 1, 28, 28}}, [] { return ConvChoice{6, 8192, 1}; });
  const std::string chosen = process.to_text();
  {
    Trainer t(c, sink);
    t.run();
  }
  const std::string path = (dir / "run_iter_2.ckpt").string();
  EXPECT_EQ(load_checkpoint(path).conv_algorithms, chosen);
  process.clear();
  c.iterations = 3;
  c.resume_path = path;
  Trainer resumed(c, sink);  // a resume loads the table while the trainer is built
  EXPECT_EQ(process.to_text(), chosen);
  std::fclose(sink);
  process.clear();
  std::filesystem::remove_all(dir);
}

TEST(ConvAlgorithmTable, TheAlgorithmsFileIsReadAtTheStartAndWrittenAtTheEnd) {
  const auto dir = std::filesystem::temp_directory_path() / cat("cgdp_conv_file_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "algos.txt").string();
  const std::string stored = cat(kH100, "\t1\t4,1,28,28\t3\t0\t1\n");
  write_file_atomically(path, stored);
  TrainConfig c = short_run(1);
  c.cudnn_algorithms_path = path;
  FILE* sink = std::fopen("/dev/null", "w");
  ConvAlgorithmTable& process = ConvAlgorithmTable::process();
  process.clear();
  {
    Trainer t(c, sink);
    EXPECT_EQ(process.to_text(), stored);  // read before the first forward
    process.find_or_search({kH100, 0, {4, 1, 28, 28}}, [] { return ConvChoice{6, 64, 1}; });
    t.run();
  }
  EXPECT_EQ(read_file(path), process.to_text());  // both choices went back to the file
  EXPECT_EQ(process.size(), 2u);
  // A damaged file stops the run before it trains, naming the file and the line.
  write_file_atomically(path, stored + "not a choice\n");
  process.clear();
  try {
    Trainer t(c, sink);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": convolution algorithms, line 2: expected 6"));
  }
  std::fclose(sink);
  process.clear();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cgdp
