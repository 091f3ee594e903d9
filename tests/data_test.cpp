// The data layer: IDX and CIFAR-10 readers and their errors, synthetic data, dataset specs,
// sample order, worker slices, resumable positions and the prefetching loader.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "cgdp/core/error.hpp"
#include "cgdp/data/batch_loader.hpp"
#include "cgdp/data/cifar10_dataset.hpp"
#include "cgdp/data/idx_dataset.hpp"
#include "cgdp/data/in_memory_dataset.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cgdp/data/sampler.hpp"
#include "cgdp/data/synthetic_dataset.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

// A fresh directory under the system temp dir, removed with its contents at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "cgdp-data-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(file), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
}

void put_be32(std::vector<uint8_t>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

uint8_t pixel_byte(int64_t image, int64_t i) {
  return static_cast<uint8_t>(image * 31 + i * 7);
}
uint8_t label_byte(int64_t image) {
  return static_cast<uint8_t>(image * 3 % 10);
}

// An IDX pair "<prefix>-images-idx3-ubyte" / "<prefix>-labels-idx1-ubyte" with `count` images of
// rows x cols; the last arguments break one field at a time.
struct IdxFiles {
  std::string prefix = "train";
  int64_t count = 5, rows = 3, cols = 4;
  bool gzip = false;
  uint32_t image_magic = 0x803, label_magic = 0x801;
  int64_t pixel_bytes_delta = 0;  // added to the pixel bytes actually written
  int64_t label_count_delta = 0;  // added to the label count in the header and the data
  int bad_label_record = -1;      // this record gets label 10

  void write(const TempDir& dir) const {
    const std::string suffix = gzip ? ".gz" : "";
    std::vector<uint8_t> images;
    put_be32(images, image_magic);
    for (int64_t d : {count, rows, cols}) put_be32(images, static_cast<uint32_t>(d));
    const int64_t pixels = count * rows * cols + pixel_bytes_delta;
    for (int64_t i = 0; i < pixels; ++i)
      images.push_back(pixel_byte(i / (rows * cols), i % (rows * cols)));
    write_file(dir.file(prefix + "-images-idx3-ubyte" + suffix), images, gzip);

    std::vector<uint8_t> labels;
    put_be32(labels, label_magic);
    put_be32(labels, static_cast<uint32_t>(count + label_count_delta));
    for (int64_t i = 0; i < count + label_count_delta; ++i)
      labels.push_back(i == bad_label_record ? 10 : label_byte(i));
    write_file(dir.file(prefix + "-labels-idx1-ubyte" + suffix), labels, gzip);
  }
};

// Runs `load` and returns the DataError's message; fails the test if nothing is thrown.
template <typename Fn>
std::string data_error_of(Fn load) {
  try {
    load();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

// --- IDX ---

TEST(IdxDataset, ReadsPlainAndGzipFilesExactly) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    TempDir dir;
    IdxFiles files;
    files.gzip = gzip;
    files.write(dir);
    const InMemoryDataset data = load_idx_dataset(dir.str(), Split::Train);
    ASSERT_EQ(data.size(), 5);
    EXPECT_EQ(data.sample_shape(), (Shape{1, 3, 4}));
    EXPECT_EQ(data.num_classes(), 10);
    std::vector<float> image(12);
    for (int64_t n = 0; n < 5; ++n) {
      float label = -1;
      data.read(n, image.data(), &label);
      EXPECT_EQ(label, label_byte(n));
      for (int64_t i = 0; i < 12; ++i) ASSERT_EQ(image[i], pixel_byte(n, i) * 0.00390625f);
    }
  }
}

TEST(IdxDataset, TestSplitReadsT10kFiles) {
  TempDir dir;
  IdxFiles files;
  files.prefix = "t10k";
  files.count = 7;
  files.write(dir);
  EXPECT_EQ(load_idx_dataset(dir.str(), Split::Test).size(), 7);
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }),
              HasSubstr("train-images-idx3-ubyte"));
}

TEST(IdxDataset, ReadsRealFashionMnist) {
  ASSERT_TRUE(fs::exists(kFashionMnist))
      << kFashionMnist << " is missing: tools/setup-debian.sh installs dataset-fashion-mnist";
  for (auto [split, size] : {std::pair{Split::Train, 60000}, std::pair{Split::Test, 10000}}) {
    const InMemoryDataset data = load_idx_dataset(kFashionMnist, split);
    ASSERT_EQ(data.size(), size);
    EXPECT_EQ(data.sample_shape(), (Shape{1, 28, 28}));
    std::vector<int64_t> per_class(10, 0);
    std::vector<float> image(784);
    float max_pixel = 0;
    for (int64_t n = 0; n < size; ++n) {
      float label;
      data.read(n, image.data(), &label);
      ASSERT_TRUE(label >= 0 && label <= 9 && label == static_cast<int>(label));
      ++per_class[static_cast<int>(label)];
      max_pixel = std::max(max_pixel, *std::max_element(image.begin(), image.end()));
    }
    for (int64_t c : per_class) EXPECT_EQ(c, size / 10);  // Fashion-MNIST is balanced
    EXPECT_EQ(max_pixel, 255 * kPixelScale);
  }
}

TEST(IdxDataset, MissingFileListsTheNamesTried) {
  TempDir dir;
  const std::string message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
  EXPECT_THAT(message, HasSubstr(dir.str()));
  EXPECT_THAT(message, HasSubstr("train-images-idx3-ubyte.gz, train-images-idx3-ubyte"));

  IdxFiles files;
  files.write(dir);
  fs::remove(dir.file("train-labels-idx1-ubyte"));
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }),
              HasSubstr("train-labels-idx1-ubyte.gz, train-labels-idx1-ubyte"));
}

TEST(IdxDataset, WrongMagicNamesFileAndBothNumbers) {
  TempDir dir;
  IdxFiles files;
  files.image_magic = 0x801;
  files.write(dir);
  const std::string message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
  EXPECT_THAT(message, HasSubstr(dir.file("train-images-idx3-ubyte")));
  EXPECT_THAT(message, HasSubstr("expected magic 0x00000803 for an idx3 ubyte image file, got "
                                 "0x00000801"));

  files.image_magic = 0x803;
  files.label_magic = 0x803;
  files.write(dir);
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }),
              HasSubstr("expected magic 0x00000801 for an idx1 ubyte label file, got 0x00000803"));
}

TEST(IdxDataset, TruncatedOrOverlongPixelsAreReported) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    TempDir dir;
    IdxFiles files;
    files.gzip = gzip;
    files.pixel_bytes_delta = -10;
    files.write(dir);
    const std::string suffix = gzip ? ".gz" : "";
    std::string message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
    EXPECT_THAT(message, HasSubstr(dir.file("train-images-idx3-ubyte" + suffix)));
    EXPECT_THAT(message, HasSubstr("expected 60 bytes of pixels, file ends after 50"));

    files.pixel_bytes_delta = 3;
    files.write(dir);
    message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
    EXPECT_THAT(message, HasSubstr("expected 60 bytes of pixels, file holds more"));
  }
}

TEST(IdxDataset, TruncatedHeaderAndCorruptGzipAreReported) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte"), {0, 0, 8, 3, 0, 0}, false);
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }),
              HasSubstr("file ends inside the header (image count)"));

  // A gzip stream cut in the middle: zlib reports it, the reader must name the file.
  fs::remove(dir.file("train-images-idx3-ubyte"));
  IdxFiles files;
  files.count = 500;
  files.rows = files.cols = 28;
  files.gzip = true;
  files.write(dir);
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  fs::resize_file(path, fs::file_size(path) / 2);
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }), HasSubstr(path));
}

TEST(IdxDataset, ImageAndLabelCountsMustAgree) {
  TempDir dir;
  IdxFiles files;
  files.label_count_delta = -1;
  files.write(dir);
  const std::string message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
  EXPECT_THAT(message, HasSubstr(dir.file("train-labels-idx1-ubyte") + " holds 4 labels"));
  EXPECT_THAT(message, HasSubstr(dir.file("train-images-idx3-ubyte") + " holds 5 images"));
}

TEST(IdxDataset, LabelAboveNineNamesFileAndRecord) {
  TempDir dir;
  IdxFiles files;
  files.bad_label_record = 3;
  files.write(dir);
  EXPECT_THAT(data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); }),
              HasSubstr(dir.file("train-labels-idx1-ubyte") +
                        ": label 10 at record 3 is out of range, expected 0..9"));
}

// A gzip bomb: the header claims 2^31 images of 28x28 (1.7 TB) over 8 MiB of zeros. The claim is
// checked against the most a gzip of the file's size can inflate to before anything is inflated.
TEST(IdxDataset, AGzipBombIsRefusedBeforeItInflates) {
  TempDir dir;
  std::vector<uint8_t> images;
  put_be32(images, 0x803);
  for (uint32_t d : {uint32_t{1} << 31, uint32_t{28}, uint32_t{28}}) put_be32(images, d);
  images.resize(images.size() + (size_t{8} << 20));
  write_file(dir.file("train-images-idx3-ubyte.gz"), images, true);
  const std::string message = data_error_of([&] { load_idx_dataset(dir.str(), Split::Train); });
  EXPECT_THAT(message,
              HasSubstr(dir.file("train-images-idx3-ubyte.gz") +
                        ": expected 1683627180032 bytes of pixels, the file holds at most "));
  EXPECT_THAT(message, HasSubstr(" bytes of gzip inflate to)"));
}

// gzip -c a >f; gzip -c b >>f is one valid gzip file of two members (zlib reads them as one
// stream), but the trailer's size is the last member's: such an IDX file had been refused.
TEST(IdxDataset, AGzipOfSeveralMembersReadsAsOne) {
  TempDir dir;
  IdxFiles files;
  files.gzip = true;
  files.write(dir);
  const InMemoryDataset one = load_idx_dataset(dir.str(), Split::Train);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    gzFile in = gzopen(dir.file(name).c_str(), "rb");
    std::vector<uint8_t> bytes(1 << 16);
    bytes.resize(
        static_cast<size_t>(gzread(in, bytes.data(), static_cast<unsigned>(bytes.size()))));
    gzclose(in);
    const std::string path = dir.file(name);
    for (size_t half : {size_t{0}, bytes.size() / 2}) {  // two members, the second appended
      gzFile out = gzopen(path.c_str(), half == 0 ? "wb" : "ab");
      const size_t end = half == 0 ? bytes.size() / 2 : bytes.size();
      gzwrite(out, bytes.data() + half, static_cast<unsigned>(end - half));
      gzclose(out);
    }
  }
  const InMemoryDataset two = load_idx_dataset(dir.str(), Split::Train);
  ASSERT_EQ(two.size(), one.size());
  ASSERT_EQ(one.size(), 5);
  std::vector<float> a(12), b(12);
  float la, lb;
  for (int64_t i = 0; i < one.size(); ++i) {
    one.read(i, a.data(), &la);
    two.read(i, b.data(), &lb);
    EXPECT_EQ(a, b);
    EXPECT_EQ(la, lb);
  }
}

// --- CIFAR-10 ---

// A CIFAR-10 batch file of `records` records; record r of file `file_index` has label
// (file_index + r) % 10 and pixels derived from both.
std::vector<uint8_t> cifar_batch(int file_index, int records) {
  std::vector<uint8_t> bytes;
  for (int r = 0; r < records; ++r) {
    bytes.push_back(static_cast<uint8_t>((file_index + r) % 10));
    for (int i = 0; i < 3072; ++i) bytes.push_back(pixel_byte(file_index * 100 + r, i));
  }
  return bytes;
}

void write_cifar(const TempDir& dir) {
  for (int f = 1; f <= 5; ++f)
    write_file(dir.file(cat("data_batch_", f, ".bin")), cifar_batch(f, 3), false);
  write_file(dir.file("test_batch.bin"), cifar_batch(0, 2), false);
}

TEST(Cifar10Dataset, ReadsTrainBatchesInOrderAndTheTestBatch) {
  TempDir dir;
  write_cifar(dir);
  const InMemoryDataset train = load_cifar10_dataset(dir.str(), Split::Train);
  ASSERT_EQ(train.size(), 15);
  EXPECT_EQ(train.sample_shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(train.num_classes(), 10);
  std::vector<float> image(3072);
  float label;
  train.read(7, image.data(), &label);  // file 3, record 1
  EXPECT_EQ(label, 4);
  for (int i = 0; i < 3072; ++i) ASSERT_EQ(image[i], pixel_byte(301, i) * kPixelScale);
  EXPECT_EQ(load_cifar10_dataset(dir.str(), Split::Test).size(), 2);
}

TEST(Cifar10Dataset, ErrorsNameTheFile) {
  TempDir dir;
  write_cifar(dir);
  fs::remove(dir.file("data_batch_4.bin"));
  EXPECT_THAT(data_error_of([&] { load_cifar10_dataset(dir.str(), Split::Train); }),
              HasSubstr("(tried data_batch_4.bin)"));

  std::vector<uint8_t> odd = cifar_batch(4, 2);
  odd.resize(odd.size() + 5);
  write_file(dir.file("data_batch_4.bin"), odd, false);
  std::string message = data_error_of([&] { load_cifar10_dataset(dir.str(), Split::Train); });
  EXPECT_THAT(message, HasSubstr(dir.file("data_batch_4.bin") + ": size 6151 bytes"));
  EXPECT_THAT(message, HasSubstr("multiple of 3073"));

  std::vector<uint8_t> bad = cifar_batch(2, 3);
  bad[3073] = 10;  // record 1's label
  write_file(dir.file("data_batch_4.bin"), cifar_batch(4, 3), false);
  write_file(dir.file("data_batch_2.bin"), bad, false);
  EXPECT_THAT(data_error_of([&] { load_cifar10_dataset(dir.str(), Split::Train); }),
              HasSubstr(dir.file("data_batch_2.bin") + ": label 10 at record 1 is out of range"));
}

// A CIFAR-10 batch has no header. One whose gzip trailer lies (it says one record) is a damaged
// gzip: zlib checks each member's length, and the error names the file.
TEST(Cifar10Dataset, AGzipWhoseTrailerLiesIsNamedCorrupt) {
  TempDir dir;
  write_cifar(dir);
  const std::string path = dir.file("data_batch_3.bin");
  write_file(path, cifar_batch(3, 2000), true);  // 6 MB: past zlib's 2 MB output buffer
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const uint32_t one_record = 3073;  // the trailer's ISIZE, little endian, now says one record
  for (int i = 0; i < 4; ++i)
    bytes[bytes.size() - 4 + i] = static_cast<char>(one_record >> (8 * i));
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_THAT(data_error_of([&] { load_cifar10_dataset(dir.str(), Split::Train); }),
              HasSubstr(path + ": corrupt file after "));
}

// --- in-memory and synthetic data, specs ---

TEST(InMemoryDataset, RejectsInconsistentContents) {
  EXPECT_THAT(data_error_of([] {
                InMemoryDataset("mine", {1, 2, 2}, 3, std::vector<uint8_t>(7), {0, 1});
              }),
              HasSubstr("mine: expected 8 pixel bytes for 2 images of 1x2x2, got 7"));
  EXPECT_THAT(data_error_of([] {
                InMemoryDataset("mine", {1, 2, 2}, 3, std::vector<uint8_t>(8), {0, 3});
              }),
              HasSubstr("mine: label 3 at record 1 is out of range, expected 0..2"));
  EXPECT_THAT(data_error_of([] {
                InMemoryDataset("mine", {1, 2, 2}, 3, {}, {});
              }),
              HasSubstr("mine: holds no samples"));
}

TEST(SyntheticDataset, IsDeterministicPerSeedAndInRange) {
  const SyntheticSpec spec{3, 5, 7, 4, 50, 9};  // 105 pixels: not a multiple of 8
  const SyntheticDataset a(spec), b(spec);
  SyntheticSpec other_seed = spec;
  other_seed.seed = 10;
  const SyntheticDataset c(other_seed);
  EXPECT_EQ(a.sample_shape(), (Shape{3, 5, 7}));
  std::vector<float> x(105), y(105), z(105);
  std::vector<int64_t> per_class(4, 0);
  int64_t same_as_other_seed = 0;
  for (int64_t n = 0; n < 50; ++n) {
    float lx, ly, lz;
    a.read(n, x.data(), &lx);
    b.read(n, y.data(), &ly);
    c.read(n, z.data(), &lz);
    ASSERT_EQ(x, y);
    ASSERT_EQ(lx, ly);
    same_as_other_seed += x == z;
    ASSERT_TRUE(lx >= 0 && lx < 4 && lx == static_cast<int>(lx));
    ++per_class[static_cast<int>(lx)];
    for (float v : x) ASSERT_TRUE(v >= 0 && v < 1);
  }
  EXPECT_EQ(same_as_other_seed, 0);
  for (int64_t count : per_class) EXPECT_GT(count, 0);
  EXPECT_THROW(SyntheticDataset(SyntheticSpec{0, 5, 7, 4, 50, 9}), UsageError);
}

TEST(OpenDataset, DispatchesOnTheScheme) {
  TempDir dir;
  IdxFiles files;
  files.write(dir);
  EXPECT_EQ(open_dataset("idx:" + dir.str(), Split::Train)->size(), 5);
  write_cifar(dir);
  EXPECT_EQ(open_dataset("cifar10:" + dir.str(), Split::Test)->size(), 2);

  SyntheticSpec defaults{1, 28, 28, 10, 100, 5};
  auto train = open_dataset("synthetic", Split::Train, defaults);
  EXPECT_EQ(train->sample_shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(train->size(), 100);
  auto shaped = open_dataset("synthetic:3,32,16,7", Split::Train, defaults);
  EXPECT_EQ(shaped->sample_shape(), (Shape{3, 32, 16}));
  EXPECT_EQ(shaped->num_classes(), 7);
  auto test = open_dataset("synthetic", Split::Test, defaults);
  std::vector<float> a(784), b(784);
  float la, lb;
  train->read(0, a.data(), &la);
  test->read(0, b.data(), &lb);
  EXPECT_NE(a, b);
}

TEST(OpenDataset, BadSpecsAreUsageErrors) {
  try {
    open_dataset("leveldb:/data", Split::Train);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown scheme 'leveldb'"));
    EXPECT_THAT(e.what(), HasSubstr("idx:DIR, cifar10:DIR, folder:DIR, list:FILE[,ROOT], "
                                    "lmdb:DIR|TRAIN,VAL, hdf5:LIST[,DATA,LABEL], synthetic"));
  }
  EXPECT_THROW(open_dataset("synthetic:3,32", Split::Train), UsageError);
  EXPECT_THROW(open_dataset("synthetic:3,32,32,10,1", Split::Train), UsageError);
  EXPECT_THROW(open_dataset("idx:", Split::Train), UsageError);
  EXPECT_THROW(open_dataset("idx:/nonexistent-cgdp-dir", Split::Train), DataError);
  EXPECT_THROW(open_dataset("hdf5:list.txt,data", Split::Train), UsageError);  // DATA without LABEL
}

TEST(ReadSamples, ThreadedReadsMatchAndReportTheLowestFailingRow) {
  const SyntheticDataset data(SyntheticSpec{1, 4, 4, 3, 64, 2});
  std::vector<int64_t> indices(64);
  std::iota(indices.rbegin(), indices.rend(), 0);
  std::vector<float> one(64 * 16), many(64 * 16), labels_one(64), labels_many(64);
  read_samples(data, indices, one.data(), labels_one.data());
  read_samples(data, indices, many.data(), labels_many.data(), 4);
  EXPECT_EQ(one, many);
  EXPECT_EQ(labels_one, labels_many);

  // Every row from 10 on fails; the message must be row 10's whatever thread gets there first.
  class FailingFrom final : public Dataset {
   public:
    std::string describe() const override { return "failing"; }
    int64_t size() const override { return 64; }
    Shape sample_shape() const override { return {1, 1, 1}; }
    int num_classes() const override { return 2; }
    void read(int64_t index, float*, float*) const override {
      if (index >= 10) throw DataError(cat("sample ", index));
    }
  };
  std::iota(indices.begin(), indices.end(), 0);
  try {
    read_samples(FailingFrom(), indices, one.data(), labels_one.data(), 4);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "sample 10");
  }
}

// --- sampler ---

TEST(Sampler, EachEpochIsAPermutationFixedBySeedAndEpoch) {
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order = epoch_permutation(1000, 7, epoch);
    EXPECT_EQ(order, epoch_permutation(1000, 7, epoch));
    EXPECT_NE(order, identity);
    EXPECT_NE(order, epoch_permutation(1000, 7, epoch + 1));
    EXPECT_NE(order, epoch_permutation(1000, 8, epoch));
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, identity);
  }
  // Pinned values: a change here breaks resuming checkpoints written by earlier builds.
  EXPECT_EQ(epoch_permutation(10, 42, 0), (std::vector<int64_t>{8, 6, 2, 3, 9, 7, 5, 1, 0, 4}));
}

TEST(Sampler, TakeCrossesIntoTheNextEpochsOrder) {
  Sampler sampler(10, Order::Shuffled, 3);
  std::vector<int64_t> got;
  sampler.take(7, got);
  EXPECT_EQ(sampler.position(), (SamplerPosition{0, 7}));
  sampler.take(7, got);
  EXPECT_EQ(sampler.position(), (SamplerPosition{1, 4}));
  EXPECT_EQ(sampler.samples_drawn(), 14);
  std::vector<int64_t> expected = epoch_permutation(10, 3, 0);
  const std::vector<int64_t> next = epoch_permutation(10, 3, 1);
  expected.insert(expected.end(), next.begin(), next.begin() + 4);
  EXPECT_EQ(got, expected);

  Sampler sequential(4, Order::Sequential, 3);
  got.clear();
  sequential.take(6, got);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 3, 0, 1}));
}

TEST(Sampler, StartingAtAPositionContinuesLikeTheOriginal) {
  Sampler original(13, Order::Shuffled, 5);
  std::vector<int64_t> skipped, a, b;
  original.take(30, skipped);
  Sampler resumed(13, Order::Shuffled, 5, original.position());
  original.take(40, a);
  resumed.take(40, b);
  EXPECT_EQ(a, b);
  EXPECT_THROW(Sampler(13, Order::Shuffled, 5, SamplerPosition{0, 13}), UsageError);
  EXPECT_THROW(Sampler(0, Order::Shuffled, 5), DataError);
}

// --- loader ---

struct BatchCopy {
  std::vector<float> images, labels;
  int64_t valid, first_sample;
  bool operator==(const BatchCopy&) const = default;
};

BatchCopy copy_of(const Batch& batch, const Dataset& data) {
  const int64_t elements = batch.rows * data.sample_elements();
  return {{batch.images, batch.images + elements},
          {batch.labels, batch.labels + batch.rows},
          batch.valid,
          batch.first_sample};
}

std::vector<BatchCopy> take_batches(BatchLoader& loader, int count) {
  std::vector<BatchCopy> out;
  for (int i = 0; i < count; ++i) out.push_back(copy_of(loader.next(), loader.dataset()));
  return out;
}

std::shared_ptr<const Dataset> small_synthetic(int64_t size) {
  return std::make_shared<SyntheticDataset>(SyntheticSpec{2, 3, 3, 5, size, 11});
}

TEST(BatchLoader, PrefetchedBatchesEqualASynchronousRead) {
  auto data = small_synthetic(37);
  for (int threads : {1, 3}) {
    SCOPED_TRACE(cat(threads, " threads"));
    BatchLoader loader(data, {.global_batch = 8, .seed = 4, .buffers = 3, .threads = threads});
    EXPECT_EQ(loader.batch_shape(), (Shape{8, 2, 3, 3}));
    Sampler sampler(37, Order::Shuffled, 4);
    for (int i = 0; i < 12; ++i) {  // about 2.6 epochs
      std::vector<int64_t> indices;
      sampler.take(8, indices);
      BatchCopy expected{std::vector<float>(8 * 18), std::vector<float>(8), 8, i * 8};
      for (int64_t r = 0; r < 8; ++r)
        data->read(indices[r], expected.images.data() + r * 18, &expected.labels[r]);
      ASSERT_EQ(copy_of(loader.next(), *data), expected) << "batch " << i;
      EXPECT_EQ(loader.position(), sampler.position());
    }
  }
}

TEST(BatchLoader, WorkerSlicesConcatenateToTheSingleWorkerBatch) {
  auto data = small_synthetic(37);
  const int64_t elements = data->sample_elements();
  BatchLoader whole(data, {.global_batch = 12, .seed = 2});
  // Four equal workers, two hosts of two such workers, and an uneven split (a CPU worker taking 2
  // of 12).
  for (std::vector<BatchSlice> slices :
       {std::vector<BatchSlice>{worker_slice(0, 4, 3), worker_slice(1, 4, 3), worker_slice(2, 4, 3),
                                worker_slice(3, 4, 3)},
        std::vector<BatchSlice>{host_slice(0, 2, 2, 3), host_slice(1, 2, 2, 3)},
        std::vector<BatchSlice>{{0, 10}, {10, 2}}}) {
    std::vector<std::unique_ptr<BatchLoader>> workers;
    for (BatchSlice s : slices)
      workers.push_back(std::make_unique<BatchLoader>(
          data, LoaderOptions{.global_batch = 12, .slice = s, .seed = 2}));
    BatchLoader reference(data, {.global_batch = 12, .seed = 2});
    for (int i = 0; i < 8; ++i) {
      const BatchCopy expected = copy_of(reference.next(), *data);
      for (size_t w = 0; w < workers.size(); ++w) {
        const Batch& got = workers[w]->next();
        const int64_t begin = slices[w].begin;
        ASSERT_EQ(got.rows, slices[w].size);
        EXPECT_EQ(got.first_sample, i * 12 + begin);
        ASSERT_TRUE(std::equal(got.images, got.images + got.rows * elements,
                               expected.images.begin() + begin * elements));
        ASSERT_TRUE(std::equal(got.labels, got.labels + got.rows, expected.labels.begin() + begin));
      }
      EXPECT_EQ(workers.back()->position(), reference.position());
    }
  }
  EXPECT_EQ(worker_slice(2, 4, 3).begin, 6);
  EXPECT_THROW(worker_slice(4, 4, 3), UsageError);
  // Host 1's worker 1 of 3 hosts x 2 workers is global worker 3 of 6.
  EXPECT_EQ(host_slice(1, 3, 2, 5).begin + 1 * 5, worker_slice(3, 6, 5).begin);
  EXPECT_EQ(host_slice(2, 3, 2, 5).size, 10);
  EXPECT_THROW(host_slice(3, 3, 2, 5), UsageError);
  EXPECT_THROW(host_slice(0, 3, 0, 5), UsageError);
}

TEST(BatchLoader, ResumingFromASavedPositionRepeatsTheSameBatches) {
  auto data = small_synthetic(29);
  const LoaderOptions options{.global_batch = 6, .seed = 8, .buffers = 4};
  BatchLoader first(data, options);
  EXPECT_EQ(first.position(), (SamplerPosition{0, 0}));
  take_batches(first, 7);
  // 42 samples: epoch 1, offset 13, whatever the prefetcher has read ahead.
  const SamplerPosition saved = first.position();
  EXPECT_EQ(saved, (SamplerPosition{1, 13}));
  const std::vector<BatchCopy> expected = take_batches(first, 9);

  LoaderOptions resume = options;
  resume.start = saved;
  BatchLoader second(data, resume);
  EXPECT_EQ(second.position(), saved);
  EXPECT_EQ(second.next().position, saved);
  EXPECT_EQ(take_batches(second, 8), std::vector(expected.begin() + 1, expected.end()));
}

TEST(BatchLoader, TestPassReadsInOrderAndPadsTheLastBatch) {
  auto data = small_synthetic(10);
  BatchLoader loader(
      data, {.global_batch = 4, .order = Order::Sequential, .epoch_end = EpochEnd::PadLastBatch});
  ASSERT_EQ(loader.batches_per_epoch(), 3);
  std::vector<float> image(18);
  float label;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t b = 0; b < 3; ++b) {
      const Batch& batch = loader.next();
      ASSERT_EQ(batch.rows, 4);
      ASSERT_EQ(batch.valid, b < 2 ? 4 : 2);
      for (int64_t r = 0; r < 4; ++r) {
        const float* got = batch.images + r * 18;
        if (r < batch.valid) {
          data->read(b * 4 + r, image.data(), &label);
          EXPECT_TRUE(std::equal(image.begin(), image.end(), got));
          EXPECT_EQ(batch.labels[r], label);
        } else {
          EXPECT_TRUE(std::all_of(got, got + 18, [](float v) { return v == 0; }));
          EXPECT_EQ(batch.labels[r], 0);
        }
      }
    }
    EXPECT_EQ(loader.position(), (SamplerPosition{pass + 1, 0}));
  }
  // A worker whose slice lies past the samples of the last batch gets no valid rows.
  BatchLoader tail(data, {.global_batch = 4,
                          .slice = {2, 2},
                          .order = Order::Sequential,
                          .epoch_end = EpochEnd::PadLastBatch});
  EXPECT_EQ(tail.next().valid, 2);
  EXPECT_EQ(tail.next().valid, 2);
  EXPECT_EQ(tail.next().valid, 0);
}

// Throws `Error` when sample `bad` is read.
template <typename Error>
class FailingDataset final : public Dataset {
 public:
  explicit FailingDataset(int64_t bad) : bad_(bad) {}
  std::string describe() const override { return "failing"; }
  int64_t size() const override { return 100; }
  Shape sample_shape() const override { return {1, 1, 1}; }
  int num_classes() const override { return 2; }
  void read(int64_t index, float* image, float* label) const override {
    if (index == bad_) throw Error(cat("sample ", index, " is unreadable"));
    *image = static_cast<float>(index);
    *label = 0;
  }

 private:
  int64_t bad_;
};

TEST(BatchLoader, LoaderErrorsReachTheConsumerAndRepeat) {
  auto data = std::make_shared<FailingDataset<DataError>>(9);
  for (int threads : {1, 4}) {
    SCOPED_TRACE(cat(threads, " threads"));
    BatchLoader loader(
        data, {.global_batch = 4, .order = Order::Sequential, .buffers = 3, .threads = threads});
    EXPECT_EQ(loader.next().images[3], 3.f);  // samples before the bad one still arrive
    EXPECT_EQ(loader.next().images[3], 7.f);
    for (int i = 0; i < 2; ++i) {
      try {
        loader.next();
        FAIL() << "expected a DataError";
      } catch (const DataError& e) {
        EXPECT_STREQ(e.what(), "sample 9 is unreadable");
      }
    }
  }
  // Any exception type, also in the first batch.
  BatchLoader first(std::make_shared<FailingDataset<std::logic_error>>(0),
                    {.global_batch = 4, .order = Order::Sequential});
  EXPECT_THROW(first.next(), std::logic_error);
}

TEST(BatchLoader, DestroysCleanlyWhileThePrefetcherWaits) {
  auto data = small_synthetic(50);
  for (int consumed = 0; consumed < 3; ++consumed) {
    BatchLoader loader(data, {.global_batch = 4, .buffers = 2});
    take_batches(loader, consumed);
  }  // each destructor must return although the ring is full
  SUCCEED();
}

TEST(BatchLoader, BadOptionsAreUsageErrors) {
  auto data = small_synthetic(10);
  EXPECT_THROW(BatchLoader(data, {.global_batch = 0}), UsageError);
  EXPECT_THROW(BatchLoader(data, {.global_batch = 4, .slice = {3, 2}}), UsageError);
  EXPECT_THROW(BatchLoader(data, {.global_batch = 4, .start = {0, 10}}), UsageError);
  EXPECT_THROW(BatchLoader(data, {.global_batch = 4, .buffers = 0}), UsageError);
  EXPECT_THROW(BatchLoader(data, {.global_batch = 4, .threads = 0}), UsageError);
}

}  // namespace
}  // namespace cgdp
