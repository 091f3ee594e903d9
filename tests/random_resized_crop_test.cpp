// torchvision's recipe: RandomResizedCrop boxes on hand-checked cases and over many draws, the
// fused crop + resize + flip + normalise by hand, a DCT-scaled decode cropping the same picture
// as a full one, and a folder read with it drawing per (seed, epoch, sample).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cgdp/core/error.hpp"
#include "cgdp/data/batch_loader.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/random_resized_crop.hpp"
#include "cgdp/data/open_dataset.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

const CounterRng kRng{7, 8, 9};

TEST(RandomResizedCrop, FallsBackToTheCentreClampedToTheRatioRange) {
  const RandomResizedCrop rrc{224};
  // No box of at least 8% of the area and ratio within [3/4, 4/3] fits a 10-pixel side, so all
  // ten tries fail: the whole image, clamped to ratio 4/3 (w = round(10 * 4/3) = 13), centred.
  EXPECT_EQ(draw_resized_crop(rrc, 10, 1000, kRng), (CropBox{0, 493, 10, 13}));
  EXPECT_EQ(draw_resized_crop(rrc, 1000, 10, kRng), (CropBox{493, 0, 13, 10}));  // h = round(10 / (3/4))
  // Scale 1 and ratio 1 on 300 x 200: a 245-pixel square never fits; the ratio clamp gives 200 x 200.
  EXPECT_EQ(draw_resized_crop({224, 1, 1, 1, 1}, 300, 200, kRng), (CropBox{50, 0, 200, 200}));
}

TEST(RandomResizedCrop, AFixedAreaAndRatioSitAtTheDrawnPlace) {
  // A quarter of 400 x 400 at ratio 1 is 200 x 200, placed at draws 2 and 3 of the first try.
  const CropBox box = draw_resized_crop({224, 0.25, 0.25, 1, 1}, 400, 400, kRng);
  EXPECT_EQ(box.height, 200);
  EXPECT_EQ(box.width, 200);
  EXPECT_EQ(box.top, static_cast<int>(kRng.uniform(2) * 201));
  EXPECT_EQ(box.left, static_cast<int>(kRng.uniform(3) * 201));
}

TEST(RandomResizedCrop, DrawsStayInsideAndSpanTheScaleAndRatioRanges) {
  const RandomResizedCrop rrc{224};
  const int H = 375, W = 500;
  double min_area = 1, max_area = 0, min_ratio = 10, max_ratio = 0, area_sum = 0;
  int at_top = 0, at_bottom = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const CropBox b = draw_resized_crop(rrc, H, W, CounterRng{1, static_cast<uint64_t>(i)});
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, H);
    ASSERT_LE(b.left + b.width, W);
    const double area = static_cast<double>(b.height) * b.width / (H * W);
    const double ratio = static_cast<double>(b.width) / b.height;
    min_area = std::min(min_area, area), max_area = std::max(max_area, area), area_sum += area;
    min_ratio = std::min(min_ratio, ratio), max_ratio = std::max(max_ratio, ratio);
    at_top += b.top == 0;
    at_bottom += b.top + b.height == H;
  }
  EXPECT_NEAR(min_area, 0.08, 0.01);  // rounding to whole pixels moves the bounds a little
  EXPECT_GT(max_area, 0.9);
  EXPECT_NEAR(min_ratio, 0.75, 0.02);
  EXPECT_NEAR(max_ratio, 4.0 / 3, 0.03);
  // Uniform area in [0.08, 1] has mean 0.54; large boxes that do not fit are drawn again.
  EXPECT_GT(area_sum / n, 0.40);
  EXPECT_LT(area_sum / n, 0.54);
  EXPECT_GT(at_top, 0);
  EXPECT_GT(at_bottom, 0);
}

Image ramp(int height, int width) {
  Image im{height, width, 3, std::vector<uint8_t>(static_cast<size_t>(height) * width * 3)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) im.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = 10 * y + x + 100 * c;
  return im;
}

TEST(ApplyResizedCrop, TheWholeImageAtItsSizeIsItsPixelsNormalisedInRgbOrder) {
  const Image im = ramp(2, 2);
  CaffeTransform t;
  t.mean_values = {1, 2, 3};
  t.std_values = {2, 4, 8};
  float out[12];
  apply_resized_crop(im, 2, 2, {0, 0, 2, 2}, false, 2, t, out);
  // Channel 0 is R (the image's first channel): pixel (y, x) = 10y + x.
  EXPECT_FLOAT_EQ(out[0], (0 - 1) / 2.f);
  EXPECT_FLOAT_EQ(out[3], (11 - 1) / 2.f);
  EXPECT_FLOAT_EQ(out[4 + 1], (101 - 2) / 4.f);
  EXPECT_FLOAT_EQ(out[8 + 2], (210 - 3) / 8.f);
  apply_resized_crop(im, 2, 2, {0, 0, 2, 2}, true, 2, t, out);  // flipped: columns swap
  EXPECT_FLOAT_EQ(out[0], (1 - 1) / 2.f);
  EXPECT_FLOAT_EQ(out[1], (0 - 1) / 2.f);
}

TEST(ApplyResizedCrop, HalvingABoxAveragesEachTwoByTwoBlock) {
  const Image im = ramp(6, 6);
  float out[3 * 2 * 2];
  // The 4 x 4 box at (1, 2) to 2 x 2: samples at box + 0.5 and + 2.5, between four pixels each.
  apply_resized_crop(im, 6, 6, {1, 2, 4, 4}, false, 2, {}, out);
  auto block = [](int y, int x) { return (10 * y + x + 10 * y + x + 1 + 10 * (y + 1) + x + 10 * (y + 1) + x + 1) / 4.f; };
  EXPECT_FLOAT_EQ(out[0], block(1, 2));
  EXPECT_FLOAT_EQ(out[1], block(1, 4));
  EXPECT_FLOAT_EQ(out[2], block(3, 2));
  EXPECT_FLOAT_EQ(out[3], block(3, 4));
  // The box is given in the full image's pixels: on a half-size decode it maps to half.
  const Image half = ramp(3, 3);
  float same[3 * 3 * 3];
  apply_resized_crop(half, 6, 6, {0, 0, 6, 6}, false, 3, {}, same);
  EXPECT_FLOAT_EQ(same[4], 11.f);  // identity on the decoded pixels: (1, 1)
}

TEST(ApplyResizedCrop, RefusesMeanOrStdOfTheWrongLength) {
  CaffeTransform t;
  t.std_values = {1, 2};
  float out[12];
  EXPECT_THROW(apply_resized_crop(ramp(2, 2), 2, 2, {0, 0, 2, 2}, false, 2, t, out), DataError);
}

class RrcFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("cgdp_rrc_", ::getpid());
    for (const char* split : {"train", "val"})
      for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 3; ++i) {
          const fs::path p = dir_ / split / cat("c", k) / cat(i, ".jpg");
          fs::create_directories(p.parent_path());
          const std::vector<uint8_t> bytes = encode_jpeg(photo(240, 320, 7 * k + i), 92);
          std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        }
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Smooth shading with a few edges, so that scaled and full decodes differ only a little.
  static Image photo(int height, int width, int seed) {
    Image im{height, width, 3, std::vector<uint8_t>(static_cast<size_t>(height) * width * 3)};
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c)
          im.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(
              60 + 50 * std::sin((x + 3 * seed) / 23.0 + c) + 40 * std::cos(y / 31.0) + (x > width / 2 ? 30 : 0));
    return im;
  }
  ImageOptions options(int size) const {
    ImageOptions o;
    o.channels = 3;
    o.random_resized_crop.size = size;
    o.transform.mirror = true;
    o.transform.scale = 1;
    o.seed = 3;
    return o;
  }
  static std::vector<float> read_all(const Dataset& d, int threads, int64_t epoch) {
    std::vector<int64_t> idx(d.size()), epochs(d.size(), epoch);
    for (int64_t i = 0; i < d.size(); ++i) idx[i] = i;
    std::vector<float> values(d.size() * (d.sample_elements() + 1));
    read_samples(d, idx, values.data(), values.data() + d.size() * d.sample_elements(), threads, epochs);
    return values;
  }
  fs::path dir_;
};

TEST_F(RrcFolder, DrawsDependOnlyOnSeedEpochAndSample) {
  const auto d = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options(64));
  EXPECT_EQ(d->sample_shape(), (Shape{3, 64, 64}));
  EXPECT_EQ(read_all(*d, 1, 2), read_all(*d, 2, 2));
  EXPECT_NE(read_all(*d, 1, 2), read_all(*d, 1, 3));
  const auto test = open_dataset(cat("folder:", dir_.string()), Split::Test, {}, options(64));
  EXPECT_EQ(read_all(*test, 1, 2), read_all(*test, 1, 3));  // the centre, every epoch
}

// N workers (or hosts) each load their slice of a global batch: together the rows are those one
// loader of the whole batch fills, for every batch of two epochs.
TEST_F(RrcFolder, SlicesOfAGlobalBatchAreTheWholeBatchsRows) {
  const std::shared_ptr<const Dataset> d = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options(16));
  const int64_t elements = d->sample_elements();
  LoaderOptions whole{.global_batch = 4, .seed = 9};
  BatchLoader one(d, whole);
  std::vector<std::unique_ptr<BatchLoader>> slices;
  for (int64_t begin : {0, 2}) {
    LoaderOptions o = whole;
    o.slice = {begin, 2};
    slices.push_back(std::make_unique<BatchLoader>(d, o));
  }
  for (int batch = 0; batch < 3; ++batch) {  // 6 images: the third batch runs into epoch 1
    const Batch& all = one.next();
    for (int s = 0; s < 2; ++s) {
      const Batch& part = slices[s]->next();
      ASSERT_TRUE(std::equal(part.images, part.images + 2 * elements, all.images + s * 2 * elements))
          << "batch " << batch << " slice " << s;
      ASSERT_TRUE(std::equal(part.labels, part.labels + 2, all.labels + s * 2));
    }
  }
}

// A 240 x 320 JPEG cropped to 32 x 32: the decode is DCT-scaled (the box needs a quarter of the
// pixels or fewer), yet it shows what a full decode of the box, resized, shows.
TEST_F(RrcFolder, AScaledDecodeCropsTheSamePictureAsAFullOne) {
  const auto test = open_dataset(cat("folder:", dir_.string()), Split::Test, {}, options(32));
  std::vector<float> scaled(3 * 32 * 32), full(3 * 32 * 32);
  float label = 0;
  test->read(1, scaled.data(), &label);
  const std::string path = dynamic_cast<const ImageDataset&>(*test).list().entries[1].path;
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  const Image whole = decode_image(bytes, 3);
  ASSERT_EQ(whole.height, 240);
  apply_resized_crop(whole, 240, 320, centre_crop_box(240, 320), false, 32, {}, full.data());
  double diff = 0;
  for (size_t i = 0; i < full.size(); ++i) diff += std::abs(scaled[i] - full[i]);
  EXPECT_LT(diff / full.size(), 4.0);  // mean absolute difference in 8-bit levels
  // A box misplaced by its scale (full-size coordinates on the smaller decode) differs far more.
  const Image small = decode_image(bytes, 3, 60, 80);
  ASSERT_LT(small.width, 320);
  std::vector<float> wrong(full.size());
  apply_resized_crop(small, small.height, small.width, centre_crop_box(240, 320), false, 32, {}, wrong.data());
  double wrong_diff = 0;
  for (size_t i = 0; i < full.size(); ++i) wrong_diff += std::abs(wrong[i] - full[i]);
  EXPECT_GT(wrong_diff / full.size(), 3 * diff / full.size());
}

TEST_F(RrcFolder, ACaffeResizeOrCropWithItIsRefused) {
  ImageOptions o = options(32);
  o.transform.crop_size = 16;
  EXPECT_THROW(open_dataset(cat("folder:", dir_.string()), Split::Train, {}, o), UsageError);
}

}  // namespace
}  // namespace cgdp
