// Checkpoints round-trip, and corruption, truncation, foreign files and other models are named.
#include "cgdp/io/checkpoint.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using ::testing::ThrowsMessage;
using testing::write_bytes;

Checkpoint sample() {
  Checkpoint c;
  c.tensors[param_key("conv1", 0)] = {{2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}};
  c.tensors[param_key("conv1", 1)] = {{2}, {0.5f, -0.5f}};
  c.tensors[history_key("conv1", 0)] = {{2, 1, 2, 2}, {0.1f, 0, 0, 0, 0, 0, 0, -0.1f}};
  c.tensors[history_key("conv1", 1)] = {{2}, {0, 0}};
  c.tensors[state_key("inception_3a/bn", 2)] = {{1}, {999.f}};
  c.tensors[param_key("inception_3a/3x3", 0)] = {{0}, {}};
  c.model_fingerprint = "fnv1a:0123456789abcdef";
  c.iteration = 1200;
  c.epoch = 3;
  c.offset = 4096;
  c.seed = -17;
  return c;
}

TEST(Checkpoint, KeysFollowTheNamingScheme) {
  EXPECT_EQ(param_key("conv1", 0), "param/conv1/0");
  EXPECT_EQ(history_key("ip2", 1), "history/ip2/1");
  EXPECT_EQ(state_key("inception_3a/bn", 2), "state/inception_3a/bn/2");
}

TEST(Checkpoint, RoundTripsTensorsAndTrainingPosition) {
  TempDir dir;
  Checkpoint saved = sample();
  saved.conv_algorithms = "NVIDIA H100 sm_90 cuDNN 91002\t0\t4,3,32\t6\t4096\t1\n";
  save_checkpoint(dir / "run.ckpt", saved);
  const Checkpoint loaded = load_checkpoint(dir / "run.ckpt");
  EXPECT_EQ(loaded.conv_algorithms, saved.conv_algorithms);
  ASSERT_EQ(loaded.tensors.size(), saved.tensors.size());
  for (const auto& [name, t] : saved.tensors) {
    ASSERT_TRUE(loaded.tensors.contains(name)) << name;
    EXPECT_EQ(loaded.tensors.at(name).shape, t.shape) << name;
    EXPECT_EQ(loaded.tensors.at(name).values, t.values) << name;
  }
  EXPECT_EQ(loaded.model_fingerprint, saved.model_fingerprint);
  EXPECT_EQ(loaded.iteration, 1200);
  EXPECT_EQ(loaded.epoch, 3);
  EXPECT_EQ(loaded.offset, 4096);
  EXPECT_EQ(loaded.seed, -17);
  const Metadata metadata = load_safetensors(dir / "run.ckpt").metadata();
  EXPECT_EQ(metadata.at("format"), "cgdp-checkpoint");
  EXPECT_EQ(metadata.at("version"), "2");
  EXPECT_EQ(metadata.at("crc32").size(), 8u);
}

// Version 2's CRC covers the header too: a changed iteration, seed or data offset, or swapped
// tensor names, loaded silently under version 1. Every single-bit flip of the header fails.
TEST(Checkpoint, EveryHeaderBitIsCovered) {
  TempDir dir;
  const auto path = dir / "run.ckpt";
  save_checkpoint(path, sample());
  const std::string bytes = read_file(path);
  const size_t header = load_safetensors(path).header_section().size();
  for (size_t i = 0; i < header; ++i)
    for (int bit : {0, 5}) {
      std::string flipped = bytes;
      flipped[i] ^= static_cast<char>(1 << bit);
      write_bytes(path, flipped);
      EXPECT_THROW(load_checkpoint(path), IoError) << "byte " << i << " bit " << bit;
    }
  std::string swapped = bytes;  // the iteration, the same length: "1200" -> "1300"
  swapped.replace(swapped.find("\"1200\""), 6, "\"1300\"");
  write_bytes(path, swapped);
  EXPECT_THAT([&] { load_checkpoint(path); },
              ThrowsMessage<IoError>(HasSubstr(path.string() + ": corrupt: CRC mismatch")));
}

// Checkpoints written before version 2 still resume (their CRC covers the data only).
TEST(Checkpoint, Version1StillLoads) {
  TempDir dir;
  const auto path = dir / "old.ckpt";
  const std::vector<float> w{1.f, 2.f};
  const TensorLayout layout = lay_out_tensors({{"param/ip/0", TensorRef::of(w, {2})}});
  char crc[9];
  std::snprintf(
      crc, sizeof crc, "%08lx",
      crc32_z(0L, reinterpret_cast<const Bytef*>(layout.data.data()), layout.data.size()));
  save_safetensors(path, {{"param/ip/0", TensorRef::of(w, {2})}},
                   {{"format", "cgdp-checkpoint"},
                    {"version", "1"},
                    {"model_fingerprint", "f"},
                    {"iteration", "7"},
                    {"epoch", "0"},
                    {"offset", "64"},
                    {"seed", "1"},
                    {"data_crc32", crc}});
  const Checkpoint c = load_checkpoint(path);
  EXPECT_EQ(c.iteration, 7);
  EXPECT_EQ(c.tensors.at("param/ip/0").values, w);
}

TEST(Checkpoint, FlippedDataByteIsACrcMismatch) {
  TempDir dir;
  const auto path = dir / "run.ckpt";
  save_checkpoint(path, sample());
  std::string bytes = read_file(path);
  bytes[bytes.size() - 3] ^= 0x01;  // inside the last tensor's bytes: the header still parses
  write_bytes(path, bytes);
  ASSERT_NO_THROW(load_safetensors(path));  // so it is the CRC that catches it
  EXPECT_THAT([&] { load_checkpoint(path); },
              ThrowsMessage<IoError>(HasSubstr(path.string() + ": corrupt: CRC mismatch")));
}

TEST(Checkpoint, TruncatedFileIsNamed) {
  TempDir dir;
  const auto path = dir / "run.ckpt";
  save_checkpoint(path, sample());
  const std::string bytes = read_file(path);
  // Cut inside the data, inside the header, and inside the header length.
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{3}}) {
    write_bytes(path, bytes.substr(0, keep));
    EXPECT_THAT([&] { load_checkpoint(path); },
                ThrowsMessage<IoError>(HasSubstr(path.string() + ": truncated")))
        << "kept " << keep << " of " << bytes.size() << " bytes";
  }
}

TEST(Checkpoint, OtherSafetensorsFilesAreNotCheckpoints) {
  TempDir dir;
  const auto path = dir / "weights.safetensors";
  const std::vector<float> w{1.f};
  save_safetensors(path, {{"param/ip/0", TensorRef::of(w, {1})}}, {{"format", "pt"}});
  EXPECT_THAT([&] { load_checkpoint(path); },
              ThrowsMessage<IoError>(HasSubstr(
                  path.string() + ": not a cgdp checkpoint (metadata \"format\" is \"pt\")")));
  write_bytes(path, "not a checkpoint at all");
  EXPECT_THAT([&] { load_checkpoint(path); }, ThrowsMessage<IoError>(HasSubstr(path.string())));
}

TEST(Checkpoint, DifferentModelIsRefusedWithBothFingerprints) {
  const Checkpoint c = sample();
  EXPECT_NO_THROW(check_compatible(c, "fnv1a:0123456789abcdef", "run.ckpt"));
  EXPECT_THAT([&] { check_compatible(c, "fnv1a:ffff", "run.ckpt"); },
              ThrowsMessage<IoError>(
                  HasSubstr("checkpoint run.ckpt was written for a different model (fingerprint "
                            "fnv1a:0123456789abcdef); expected fnv1a:ffff")));
}

TEST(Checkpoint, SavingReplacesTheOldCheckpoint) {
  TempDir dir;
  const auto path = dir / "run.ckpt";
  save_checkpoint(path, sample());
  Checkpoint next = sample();
  next.iteration = 1300;
  next.tensors[param_key("conv1", 1)].values = {2.f, 3.f};
  save_checkpoint(path, next);
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.iteration, 1300);
  EXPECT_EQ(loaded.tensors.at(param_key("conv1", 1)).values, (std::vector<float>{2.f, 3.f}));
  EXPECT_THAT(dir.entries(), ::testing::ElementsAre("run.ckpt"));
}

}  // namespace
}  // namespace cgdp
