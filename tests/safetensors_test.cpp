// safetensors files round-trip, hand-built files parse, every kind of damage is named, and an
// independent Python reader agrees with what we write.
#include "cgdp/io/safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

// A file exactly as the format describes it: u64 little-endian length, JSON padded with spaces.
std::string hand_built(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + json + data;
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

const std::vector<float> kWeights{0.5f, 1.25f, -3.f, 4.f, 100.125f, 0.f};
const std::vector<double> kBias{1.5, 2.25, -0.125, 1024.0};

TensorRefs sample_tensors() {
  static const float scalar = 7.f;
  return {{"conv1/w", TensorRef::of(kWeights, {2, 3})},
          {"conv1/b", TensorRef::of(kBias, {4})},
          {"scale", TensorRef::of(std::span(&scalar, 1), {})},
          {"empty", TensorRef::of(std::span<const float>(), {0, 5})}};
}

TEST(Safetensors, RoundTripsF32AndF64WithMetadata) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  const Metadata metadata{{"model", "lenet"}, {"note", "ü and \"quotes\""}};
  save_safetensors(path, sample_tensors(), metadata);
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), 4u);
  EXPECT_EQ(file.entry("conv1/w").dtype, DType::kF32);
  EXPECT_EQ(file.entry("conv1/w").shape, (Shape{2, 3}));
  EXPECT_EQ(file.values<float>("conv1/w"), kWeights);
  EXPECT_EQ(file.entry("conv1/b").dtype, DType::kF64);
  EXPECT_EQ(file.values<double>("conv1/b"), kBias);
  EXPECT_EQ(file.values<float>("conv1/b"), std::vector<float>(kBias.begin(), kBias.end()));
  EXPECT_EQ(file.entry("scale").shape, Shape{});
  EXPECT_THAT(file.values<float>("scale"), ElementsAre(7.f));
  EXPECT_EQ(file.entry("empty").shape, (Shape{0, 5}));
  EXPECT_TRUE(file.values<float>("empty").empty());
  // Header padded to 8 bytes and F64 first, so every tensor is aligned to its element size.
  const std::string bytes = read_file(path);
  uint64_t header_length;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(file.entry("conv1/b").begin, 0u);
  EXPECT_THAT(dir.entries(), ElementsAre("model.safetensors"));
}

TEST(Safetensors, ReadsAHandBuiltFile) {
  const std::string bytes = hand_built(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
      R"("a":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16],"extra":1}})",
      raw<double>({-0.25, 3.0}) + raw<float>({1.5f, -2.f}));
  const SafetensorsFile file(bytes, "hand.safetensors");
  EXPECT_EQ(file.metadata(), (Metadata{{"format", "pt"}}));
  EXPECT_EQ(file.entry("a").shape, (Shape{1, 2}));
  EXPECT_EQ(file.values<double>("a"), (std::vector<double>{-0.25, 3.0}));
  EXPECT_EQ(file.values<float>("b"), (std::vector<float>{1.5f, -2.f}));
  EXPECT_THAT([&] { file.entry("c"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("no tensor named 'c'")));
}

void expect_rejected(const std::string& bytes, const std::string& needle) {
  EXPECT_THAT([&] { SafetensorsFile(bytes, "bad.safetensors"); },
              ::testing::ThrowsMessage<IoError>(
                  ::testing::AllOf(HasSubstr("bad.safetensors: "), HasSubstr(needle))))
      << "expected: " << needle;
}

std::string one_tensor(const std::string& entry, const std::string& data) {
  return hand_built(cat(R"({"t":)", entry, "}"), data);
}

TEST(Safetensors, DamagedFilesAreRejectedWithTheReason) {
  const std::string good =
      one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", raw<float>({1.f, 2.f}));
  ASSERT_NO_THROW(SafetensorsFile(good, "good"));
  expect_rejected(good.substr(0, good.size() - 1), "truncated");
  expect_rejected(good.substr(0, 5), "truncated");
  std::string long_length = good;
  long_length[1] = 0x10;  // 56 + 4096
  expect_rejected(long_length, "header length 4152 exceeds");
  std::string short_length = good;
  short_length[0] = static_cast<char>(short_length[0] - 8);
  expect_rejected(short_length, "bad JSON header");
  std::string bad_json = good;
  bad_json[8 + 5] = '#';
  expect_rejected(bad_json, "bad JSON header");
  expect_rejected(hand_built("[1, 2]", ""), "bad JSON header");
  expect_rejected(
      one_tensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", raw<float>({1.f, 2.f})),
      "tensor 't': data_offsets [0, 8) hold 8 bytes but F32 of shape [3] needs 3 x 4");
  expect_rejected(
      one_tensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", raw<float>({1.f, 2.f})),
      "truncated: the tensors need 16 data bytes but the file holds 8");
  expect_rejected(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", ""),
                  "end before they begin");
  expect_rejected(one_tensor(R"({"dtype":"BF16","shape":[2],"data_offsets":[0,4]})", "abcd"),
                  "unsupported dtype \"BF16\"");
  expect_rejected(one_tensor(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", "12345678"),
                  "non-integer or negative");
  expect_rejected(one_tensor(R"({"dtype":"F32","shape":[2]})", "12345678"), "data_offsets");
  expect_rejected(good + "xy", "2 bytes after the last tensor belong to no tensor");
}

TEST(Safetensors, OverlapsGapsAndDuplicatesAreRejected) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  expect_rejected(
      hand_built(cat("{", a, R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
                 std::string(12, '\0')),
      "tensor 'b' data_offsets [4, 12) overlap those of tensor 'a'");
  expect_rejected(
      hand_built(cat("{", a, R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})"),
                 std::string(16, '\0')),
      "bytes [8, 12) before tensor 'b' belong to no tensor");
  expect_rejected(hand_built(cat("{", a, ",", a, "}"), std::string(8, '\0')),
                  "header names \"a\" twice");
  expect_rejected(hand_built(cat(R"({"__metadata__":{"k":3},)", a, "}"), std::string(8, '\0')),
                  "__metadata__ value for \"k\" is not a string");
}

// Duplicates were found with nlohmann's callback parser, which rescans the whole object after each
// entry: 50,000 tensors took 50 s. Now a moment, and a duplicate among them is still named.
TEST(Safetensors, FiftyThousandTensorsParseAndADuplicateAmongThemIsNamed) {
  constexpr int kTensors = 50000;
  auto entry = [](int i) {
    return cat(R"("t)", i, R"(":{"dtype":"F32","shape":[1],"data_offsets":[)", 4 * i, ",",
               4 * i + 4, "]}");
  };
  std::string json = "{" + entry(0);
  for (int i = 1; i < kTensors; ++i) json += "," + entry(i);
  const std::string data(4 * kTensors, '\0');
  const SafetensorsFile file(hand_built(json + "}", data), "many");
  EXPECT_EQ(file.tensors().size(), static_cast<size_t>(kTensors));
  EXPECT_EQ(file.entry("t49999").begin, 4u * 49999);
  expect_rejected(hand_built(json + "," + entry(7) + "}", data), "header names \"t7\" twice");
}

// Runs tools/read_safetensors.py: a reader that shares no code with ours.
TEST(Safetensors, IndependentPythonReaderAgrees) {
  const char* python = "/usr/bin/python3";
  ASSERT_TRUE(std::filesystem::exists(python))
      << python << " is missing: tools/setup-debian.sh installs python3";
  TempDir dir;
  const auto path = dir / "model.safetensors";
  save_safetensors(path, sample_tensors(), {{"model", "lenet"}});
  const std::string command =
      cat(python, " ", testing::source_dir(), "/tools/read_safetensors.py ", path.string(), " 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << output;
  std::map<std::string, std::string> lines;  // name -> "dtype shape sum"
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const auto tab = line.find('\t');
    if (tab != std::string::npos) lines[line.substr(0, tab)] = line.substr(tab + 1);
  }
  // Sums of exactly representable values, so the printed figures are exact.
  EXPECT_EQ(lines["metadata"], "model\tlenet");
  EXPECT_EQ(lines["conv1/w"], "F32\t[2, 3]\t102.875") << output;
  EXPECT_EQ(lines["conv1/b"], "F64\t[4]\t1027.625") << output;
  EXPECT_EQ(lines["scale"], "F32\t[]\t7.0") << output;
  EXPECT_EQ(lines["empty"], "F32\t[0, 5]\t0.0") << output;
}

}  // namespace
}  // namespace cgdp
