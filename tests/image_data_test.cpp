// Image data: JPEG/PNG decoding against Pillow's decode of the same bytes, Caffe's transforms on
// hand-checked cases, folder and list sources reading the same samples, draws that depend only on
// (seed, epoch, sample), and bad input named in one line. The data sets are made here.
#include <gtest/gtest.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cgdp/core/error.hpp"
#include "cgdp/data/idx_dataset.hpp"
#include "cgdp/data/image/caffe_transform.hpp"
#include "cgdp/data/image/convert_images.hpp"
#include "cgdp/data/image/image.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/image_mean.hpp"
#include "cgdp/data/image/lmdb_database.hpp"
#include "cgdp/data/image/lmdb_dataset.hpp"
#include "cgdp/data/image/mean_file.hpp"
#include "cgdp/data/in_memory_dataset.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cgdp/io/file.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

// A smooth picture with edges (gradients and a disc), closer to a photo than noise is.
Image picture(int height, int width, int channels, int seed = 0) {
  Image im{height, width, channels, std::vector<uint8_t>(static_cast<size_t>(height) * width * channels)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const bool disc = (x - width / 2) * (x - width / 2) + (y - height / 3) * (y - height / 3) <
                        height * width / 16;
      for (int c = 0; c < channels; ++c)
        im.pixels[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(
            (disc ? 200 : 30) + (x * 40 / width) + c * 10 + (y * 17 / height) + seed * 3);
    }
  return im;
}

class ImageFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("cgdp_image_", ::getpid(), "_",
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return p.string();
  }
  std::vector<uint8_t> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Pillow's decode of `path` (mode L or RGB), drafted (DCT-scaled) to at least h x w when given.
  std::vector<uint8_t> pillow_decode(const std::string& path, const char* mode, int h = 0, int w = 0) {
    const std::string out = (dir_ / "pillow.raw").string();
    const std::string script =
        cat("from PIL import Image; im = Image.open('", path, "'); ",
            h > 0 ? cat("im.draft('", mode, "', (", w, ", ", h, ")); ") : std::string(),
            "open('", out, "', 'wb').write(im.convert('", mode, "').tobytes()); print(im.size)");
    const testing::CommandResult r = testing::run_command(cat("/usr/bin/python3 -c \"", script, "\" 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read(out);
  }
  fs::path dir_;
};

TEST_F(ImageFiles, PngRoundTripsExactly) {
  for (int channels : {1, 3}) {
    const Image im = picture(13, 21, channels);
    const Image back = decode_image(encode_png(im), channels);
    EXPECT_EQ(back.height, 13);
    EXPECT_EQ(back.width, 21);
    EXPECT_EQ(back.pixels, im.pixels) << channels << " channels";
  }
  // A colour PNG read as gray, and a gray one as colour, convert instead of failing.
  EXPECT_EQ(decode_image(encode_png(picture(4, 4, 3)), 1).pixels.size(), 16u);
  EXPECT_EQ(decode_image(encode_png(picture(4, 4, 1)), 3).pixels.size(), 48u);
}

TEST_F(ImageFiles, JpegDecodeMatchesPillowAndDctScalingMatchesItsDraft) {
  const std::string colour = write("c.jpg", encode_jpeg(picture(96, 128, 3), 90));
  const Image full = decode_image(read(colour), 3);
  EXPECT_EQ(full.height, 96);
  EXPECT_EQ(full.width, 128);
  EXPECT_EQ(full.pixels, pillow_decode(colour, "RGB"));
  // At most half the size asked for: decoded at 1/2 or 1/4 in the DCT domain, as Pillow's draft.
  for (auto [h, w, scaled_h] : {std::tuple{48, 64, 48}, std::tuple{30, 40, 48}, std::tuple{20, 30, 24}}) {
    const Image small = decode_image(read(colour), 3, h, w);
    EXPECT_EQ(small.height, scaled_h) << h << "x" << w;
    EXPECT_EQ(small.pixels, pillow_decode(colour, "RGB", h, w)) << h << "x" << w;
  }
  const std::string gray = write("g.jpg", encode_jpeg(picture(40, 24, 1), 75));
  EXPECT_EQ(decode_image(read(gray), 1).pixels, pillow_decode(gray, "L"));
}

// A region's decode covers the region (plus a pixel, the left edge on a DCT block's) and its
// pixels are the full decode's there, at full and at half scale.
TEST_F(ImageFiles, JpegRegionsDecodeTheFullDecodesPixels) {
  const std::vector<uint8_t> jpeg = encode_jpeg(picture(96, 128, 3), 90);
  const CropBox region{21, 37, 40, 50};
  for (int scale : {1, 2}) {
    const Image full = decode_image(jpeg, 3, 96 / scale, 128 / scale);
    Image part;
    decode_image(jpeg, 3, 96 / scale, 128 / scale, part, region);
    EXPECT_EQ(part.whole_height, 96 / scale);
    EXPECT_EQ(part.whole_width, 128 / scale);
    EXPECT_LE(part.top, region.top / scale);
    EXPECT_LE(part.left, region.left / scale);
    EXPECT_GE(part.top + part.height, (region.top + region.height) / scale);
    EXPECT_GE(part.left + part.width, (region.left + region.width) / scale);
    EXPECT_LT(part.height * part.width, full.height * full.width / 2) << "scale 1/" << scale;
    for (int y = 0; y < part.height; ++y)
      for (int x = 0; x < part.width; ++x)
        for (int c = 0; c < 3; ++c)
          ASSERT_EQ(part.at(y, x, c), full.at(part.top + y, part.left + x, c))
              << "scale 1/" << scale << " at " << y << "," << x << "," << c;
  }
}

TEST_F(ImageFiles, DamagedFilesAreErrorsSayingWhat) {
  std::vector<uint8_t> jpeg = encode_jpeg(picture(64, 64, 3), 90);
  jpeg.resize(jpeg.size() / 2);
  EXPECT_THROW(decode_image(jpeg, 3), DataError);
  std::vector<uint8_t> png = encode_png(picture(64, 64, 3));
  png.resize(png.size() / 2);
  EXPECT_THROW(decode_image(png, 3), DataError);
  try {
    decode_image(std::vector<uint8_t>{'G', 'I', 'F', '8'}, 3);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "neither JPEG nor PNG (by its first bytes)");
  }
}

// ImageNet holds CMYK JPEGs; libjpeg converts none to RGB ("Unsupported color conversion
// request" had refused them). They decode as OpenCV converts them for Caffe, from the inks
// libjpeg reads: channel = k - (255 - ink) * k / 256; gray is their BT.601 luma.
TEST_F(ImageFiles, CmykJpegsDecodeAsOpenCvConvertsThem) {
  const int h = 16, w = 24;
  std::vector<uint8_t> inks(static_cast<size_t>(h) * w * 4);
  for (size_t i = 0; i < inks.size(); ++i) inks[i] = static_cast<uint8_t>(37 * i + (i % 4) * 61);
  tjhandle compressor = tjInitCompress(), decompressor = tjInitDecompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(
      tjCompress2(compressor, inks.data(), w, 0, h, TJPF_CMYK, &jpeg, &size, TJSAMP_444, 95, 0), 0);
  const std::vector<uint8_t> bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  std::vector<uint8_t> read_inks(inks.size());
  ASSERT_EQ(tjDecompress2(decompressor, bytes.data(), bytes.size(), read_inks.data(), w, 0, h,
                          TJPF_CMYK, 0),
            0);
  tjDestroy(compressor);
  tjDestroy(decompressor);
  std::vector<uint8_t> rgb, gray;
  for (size_t p = 0; p < read_inks.size(); p += 4) {
    const int k = read_inks[p + 3];
    uint8_t c[3];
    for (int i = 0; i < 3; ++i)
      rgb.push_back(c[i] = static_cast<uint8_t>(k - ((255 - read_inks[p + i]) * k >> 8)));
    gray.push_back(static_cast<uint8_t>((c[0] * 19595 + c[1] * 38470 + c[2] * 7471 + 32768) >> 16));
  }
  const Image colour = decode_image(bytes, 3);
  EXPECT_EQ(colour.height, h);
  EXPECT_EQ(colour.width, w);
  EXPECT_EQ(colour.pixels, rgb);
  EXPECT_EQ(decode_image(bytes, 1).pixels, gray);
}

// A few hundred bytes can declare 65500 x 65500 pixels (12 GiB to decode): the header's size is
// refused before any pixel is decoded, JPEG and PNG alike.
TEST_F(ImageFiles, DecompressionBombsAreRefusedByTheirHeader) {
  std::vector<uint8_t> jpeg = encode_jpeg(picture(8, 8, 3), 90);
  for (size_t i = 0; i + 8 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {  // SOF0: length, precision, height, width
      jpeg[i + 5] = jpeg[i + 7] = 0xFF;            // 65500 x 65500, libjpeg's largest
      jpeg[i + 6] = jpeg[i + 8] = 0xDC;
      break;
    }
  std::vector<uint8_t> png = encode_png(picture(8, 8, 3));
  for (int i = 16; i < 24; ++i) png[i] = i % 4 < 2 ? 0x00 : 0xFF;  // IHDR width, height: 65535
  const uLong crc = crc32(0, png.data() + 12, 17);                 // "IHDR" and its 13 bytes
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  for (const auto& [bytes, format, side] :
       {std::tuple{jpeg, "JPEG", 65500}, std::tuple{png, "PNG", 65535}}) {
    SCOPED_TRACE(format);
    try {
      decode_image(bytes, 3);
      ADD_FAILURE() << "decoded";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()),
                cat(format, " declares ", side, " x ", side, " pixels, more than the ", 268435456,
                    " cgdp decodes (cut or shrink it first)"));
    }
    EXPECT_THROW(image_size(bytes), DataError);
  }
}

TEST(ResizeBilinear, SamplesAtPixelCentresAsOpenCv) {
  const Image row{1, 2, 1, {0, 100}};
  EXPECT_EQ(resize_bilinear(row, 1, 4).pixels, (std::vector<uint8_t>{0, 25, 75, 100}));
  const Image square{2, 2, 1, {0, 10, 20, 30}};
  EXPECT_EQ(resize_bilinear(square, 1, 1).pixels, (std::vector<uint8_t>{15}));
}

// A 4x4 gray image of 0..15.
Image counting() {
  Image im{4, 4, 1, {}};
  for (int i = 0; i < 16; ++i) im.pixels.push_back(static_cast<uint8_t>(i));
  return im;
}

TEST(CaffeTransform, CentreCropMeanAndScaleByHand) {
  CaffeTransform t;
  t.crop_size = 2;
  t.mean_values = {1};
  t.scale = 0.5f;
  const CropDraw d = draw_crop(t, 4, 4, /*train=*/false, CounterRng{1});
  EXPECT_EQ(d.top, 1);
  EXPECT_EQ(d.left, 1);
  EXPECT_FALSE(d.mirror);
  float out[4];
  apply_caffe_transform(counting(), t, d, out);  // pixels 5 6 / 9 10
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{2, 2.5f, 4, 4.5f}));
  apply_caffe_transform(counting(), t, CropDraw{0, 2, true}, out);  // 2 3 / 6 7, mirrored
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1, 0.5f, 3, 2.5f}));
}

TEST(CaffeTransform, ColourComesOutBgrWithPerChannelMeans) {
  const Image pixel{1, 1, 3, {10, 20, 30}};
  CaffeTransform t;
  t.mean_values = {1, 2, 3};  // B, G, R
  float out[3];
  apply_caffe_transform(pixel, t, CropDraw{}, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{29, 18, 7}));
  // A 2x2 crop at (1, 1) of a 3x3 colour image, mirrored: out[c][h][w] is source pixel
  // (1 + h, 1 + 1 - w), channel 2 - c, minus the mean, times the scale.
  Image im{3, 3, 3, {}};
  for (int i = 0; i < 27; ++i) im.pixels.push_back(static_cast<uint8_t>(i * 5));
  t.crop_size = 2;
  t.scale = 0.5f;
  float crop[12];
  apply_caffe_transform(im, t, CropDraw{1, 1, true}, crop);
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w)
        EXPECT_EQ(crop[(c * 2 + h) * 2 + w], (im.at(1 + h, 2 - w, 2 - c) - t.mean_values[c]) * 0.5f)
            << c << h << w;
  EXPECT_EQ(crop[0], (im.at(1, 2, 2) - 1) * 0.5f);  // B of the top right pixel: (5*(3*5+2) - 1)/2
  EXPECT_EQ(crop[0], 42.f);
}

TEST(CaffeTransform, MeanImageIsReadAtTheCropsPlace) {
  CaffeTransform t;
  t.crop_size = 2;
  t.mean_height = t.mean_width = 4;
  for (int i = 0; i < 16; ++i) t.mean_image.push_back(static_cast<float>(i % 4));  // the column
  float out[4];
  apply_caffe_transform(counting(), t, CropDraw{2, 1, false}, out);  // pixels 9 10 / 13 14
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{8, 8, 12, 12}));
  t.mean_width = 5;
  EXPECT_THROW(apply_caffe_transform(counting(), t, CropDraw{}, out), DataError);
}

TEST(CaffeTransform, TrainingDrawsCoverEveryPlaceAndDependOnlyOnTheKey) {
  CaffeTransform t;
  t.crop_size = 2;
  t.mirror = true;
  std::set<std::tuple<int, int, bool>> seen;
  for (uint64_t k = 0; k < 4000; ++k) {
    const CropDraw d = draw_crop(t, 5, 4, true, CounterRng{7, k});
    ASSERT_TRUE(d.top >= 0 && d.top <= 3 && d.left >= 0 && d.left <= 2) << d.top << "," << d.left;
    seen.insert({d.top, d.left, d.mirror});
    const CropDraw again = draw_crop(t, 5, 4, true, CounterRng{7, k});
    ASSERT_EQ(std::tie(d.top, d.left, d.mirror), std::tie(again.top, again.left, again.mirror));
  }
  EXPECT_EQ(seen.size(), 4u * 3u * 2u);
}

// Three classes named out of order, PNG and JPEG files, 10x12 colour pictures.
class ImageSources : public ImageFiles {
 protected:
  void make_split(const std::string& split, int per_class) {
    int seed = 0;
    for (const char* name : {"cat", "ant", "bee"})
      for (int i = 0; i < per_class; ++i) {
        const Image im = picture(10, 12, 3, ++seed);
        if (i % 2) write(cat(split, "/", name, "/", i, ".png"), encode_png(im));
        else write(cat(split, "/", name, "/", i, ".JPG"), encode_jpeg(im, 95));
      }
  }
  ImageOptions options(int crop = 8) {
    ImageOptions o;
    o.channels = 3;
    o.height = o.width = crop;
    o.transform.crop_size = crop;
    o.transform.mirror = true;
    o.seed = 5;
    return o;
  }
  static std::vector<float> all(const Dataset& d, int threads = 1, int64_t epoch = 0) {
    std::vector<int64_t> idx(d.size()), epochs(d.size(), epoch);
    for (int64_t i = 0; i < d.size(); ++i) idx[i] = i;
    std::vector<float> values(d.size() * (d.sample_elements() + 1));
    read_samples(d, idx, values.data(), values.data() + d.size() * d.sample_elements(), threads, epochs);
    return values;
  }
};

TEST_F(ImageSources, FolderClassesAreSortedAndAListOfTheSameFilesReadsTheSame) {
  make_split("train", 3);
  make_split("val", 2);
  const auto folder = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options());
  const auto& list = dynamic_cast<const ImageDataset&>(*folder).list();
  EXPECT_EQ(list.classes, (std::vector<std::string>{"ant", "bee", "cat"}));
  EXPECT_EQ(folder->size(), 9);
  EXPECT_EQ(folder->num_classes(), 3);
  EXPECT_EQ(folder->sample_shape(), (Shape{3, 8, 8}));
  std::string lines;
  for (const ImageEntry& e : list.entries)
    lines += cat(fs::relative(e.path, dir_ / "train").string(), " ", e.label, "\n");
  std::ofstream(dir_ / "train.txt") << lines;
  const auto listed = open_dataset(cat("list:", (dir_ / "train.txt").string(), ",", (dir_ / "train").string()),
                                   Split::Train, {}, options());
  EXPECT_EQ(all(*folder), all(*listed));
  EXPECT_EQ(open_dataset(cat("folder:", dir_.string()), Split::Test, {}, options())->size(), 6);
}

TEST_F(ImageSources, ThreadsDrawTheSameCropsAndEpochsDrawNewOnes) {
  make_split("train", 4);
  make_split("val", 1);
  const auto d = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options(6));
  EXPECT_EQ(all(*d, 1, 3), all(*d, 2, 3));
  EXPECT_NE(all(*d, 1, 3), all(*d, 1, 4));
  // The test split takes the centre, unmirrored, in every epoch.
  ImageOptions o = options(6);
  o.transform.mirror = false;
  const auto test = open_dataset(cat("folder:", dir_.string()), Split::Test, {}, o);
  EXPECT_EQ(all(*test, 1, 3), all(*test, 1, 4));
}

TEST_F(ImageSources, BadInputIsOneLineNamingWhere) {
  make_split("train", 1);
  auto message = [&](auto f) {
    try {
      f();
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  fs::create_directories(dir_ / "train" / "dog");
  EXPECT_EQ(message([&] { open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options()); }),
            cat((dir_ / "train" / "dog").string(), ": class folder without .jpg, .jpeg or .png files"));
  fs::remove(dir_ / "train" / "dog");
  std::ofstream(dir_ / "bad.txt") << "cat/0.JPG 0\n\nant/0.JPG -1\n";
  EXPECT_NE(message([&] { read_image_list((dir_ / "bad.txt").string(), (dir_ / "train").string()); })
                .find("bad.txt:3: expected 'relative/path label' with a label >= 0, got 'ant/0.JPG -1'"),
            std::string::npos);
  write("train/cat/0.JPG", {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3});  // a JPEG cut short
  const auto d = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options());
  float image[3 * 8 * 8], label;
  const std::string what = message([&] { d->read(2, image, &label); });
  EXPECT_EQ(what.rfind((dir_ / "train" / "cat" / "0.JPG").string() + ": ", 0), 0u) << what;
  EXPECT_NE(message([&] { open_dataset(cat("folder:", dir_.string()), Split::Test, {}, options()); })
                .find("no such folder"),
            std::string::npos);
}

// Training from a folder with random crops and mirrors, stopped mid-epoch (3 iterations an epoch,
// a snapshot at 2) and resumed, ends with the same parameters as the run that never stopped.
TEST_F(ImageFiles, TrainingFromAFolderResumesExactlyMidEpoch) {
  for (const char* split : {"train", "val"})
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 6; ++i) write(cat(split, "/c", k, "/", i, ".png"), encode_png(picture(32, 32, 1, 10 * k + i)));
  // Caffe's recipe, then torchvision's.
  for (const char* recipe : {" --crop 28 --mirror", " --augment rrc:28 --mirror --mean-value 100 --std 60"}) {
    const std::string run = cat(testing::binary_dir(), "/cgdp train --data folder:", dir_.string(), recipe,
                                " --batch 4 --test-batch 4 --test-samples 4 --plain"
                                " --lr 0.05 --lr-policy fixed ");  // poly would decay over each run
    const std::string a = (dir_ / "a.safetensors").string(), b = (dir_ / "b.safetensors").string();
    const std::string prefix = (dir_ / "ck").string();
    testing::CommandResult r = testing::run_command(run + "--iterations 5 --save " + a + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("on folder:"), std::string::npos) << r.output;
    r = testing::run_command(cat(run, "--iterations 2 --snapshot-every 2 --snapshot-prefix ", prefix, " 2>&1"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(cat(run, "--iterations 5 --resume ", prefix, "_iter_2.ckpt --save ", b, " 2>&1"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(read(a), read(b)) << recipe;
    EXPECT_FALSE(read(a).empty());
  }
}

// Caffe's Datum field numbers, from bytes written by hand: channels 1, height 2, width 3, data 4,
// label 5, encoded 7.
TEST(Datum, ReadsCaffesFieldNumbers) {
  const std::string wire = std::string("\x08\x03\x10\x01\x18\x02\x22\x06", 8) + "ABCDEF" +
                           std::string("\x28\x07\x38\x00", 4);
  proto::Datum d;
  ASSERT_TRUE(d.ParseFromString(wire));
  EXPECT_EQ(d.channels(), 3);
  EXPECT_EQ(d.height(), 1);
  EXPECT_EQ(d.width(), 2);
  EXPECT_EQ(d.label(), 7);
  EXPECT_FALSE(d.encoded());
  // Planes B = "AB", G = "CD", R = "EF": pixel 0 is RGB (E, C, A).
  const Image im = datum_image(d, 3);
  EXPECT_EQ(im.pixels, (std::vector<uint8_t>{'E', 'C', 'A', 'F', 'D', 'B'}));
  EXPECT_EQ(raw_datum(im, 7).data(), "ABCDEF");
}

// A record's C x H x W can pass 64 bits: 2^21 x 2^21 x 2^22 wrapped to the 0 bytes it holds, and
// the decode wrote its pixels into none (found by tests/fuzz/datum_fuzz.cpp).
TEST(Datum, SizesWhoseProductOverflowsAreRefused) {
  proto::Datum d;
  d.set_channels(1 << 21);
  d.set_height(1 << 21);
  d.set_width(1 << 22);
  d.set_data("");
  for (const auto& read : std::vector<std::function<void()>>{[&] { datum_image(d, 1 << 21); },
                                                             [&] { datum_shape(d); }}) {
    try {
      read();
      ADD_FAILURE() << "no error";
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(),
                   "raw Datum of 2097152x2097152x4194304 holds 0 bytes (float_data is not read)");
    }
  }
}

// A mean file written byte by byte as Caffe's BlobProto: num 1 (field 1), channels 1 (2),
// height 1 (3), width 2 (4), packed float data 3.5, -1 (5).
TEST_F(ImageFiles, MeanFilesAreCaffesBlobProto) {
  std::vector<uint8_t> wire = {0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2A, 8};
  for (float v : {3.5f, -1.f}) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    wire.insert(wire.end(), b, b + 4);
  }
  CaffeTransform t;
  load_mean_file(write("mean.binaryproto", wire), t);
  EXPECT_EQ(t.mean_image, (std::vector<float>{3.5f, -1.f}));
  EXPECT_EQ(t.mean_height, 1);
  EXPECT_EQ(t.mean_width, 2);
  float out[2];
  apply_caffe_transform(Image{1, 2, 1, {10, 20}}, t, CropDraw{}, out);
  EXPECT_EQ(std::vector<float>(out, out + 2), (std::vector<float>{6.5f, 21.f}));
  // The wrong shape for the images, a count that disagrees, and not a BlobProto: one line each.
  EXPECT_THROW(apply_caffe_transform(Image{2, 2, 1, {1, 2, 3, 4}}, t, CropDraw{}, out), DataError);
  wire[7] = 3;  // width 3, but two values
  CaffeTransform u;
  try {
    load_mean_file(write("bad.binaryproto", wire), u);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.binaryproto: mean blob of 1x1x1x3 holds 2 values"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_mean_file(write("junk.binaryproto", {0xFF, 0xFF, 0xFF}), u), DataError);
  // A NaN mean had made every input NaN, and "test accuracy 1".
  wire[7] = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&wire[wire.size() - 4], &nan, 4);
  try {
    load_mean_file(write("nan.binaryproto", wire), u);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "nan.binaryproto: mean value nan at element 1: expected finite numbers"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ImageSources, SkipBadImagesReplacesThemByTheNextSampleAndCounts) {
  make_split("train", 2);  // ant/0.JPG ant/1.png bee/0.JPG bee/1.png cat/0.JPG cat/1.png
  write("train/ant/1.png", {0x89, 'P', 'N', 'G', 1, 2});
  const std::string spec = cat("folder:", dir_.string());
  std::vector<float> a(3 * 8 * 8), b(3 * 8 * 8);
  float la = -1, lb = -2;
  EXPECT_THROW(open_dataset(spec, Split::Train, {}, options())->read(1, a.data(), &la), DataError);
  ImageOptions o = options();
  o.skip_bad = true;
  const auto d = open_dataset(spec, Split::Train, {}, o);
  EXPECT_EQ(d->skipped_summary(), "");
  d->read(1, a.data(), &la);
  d->read(2, b.data(), &lb);
  EXPECT_EQ(a, b);
  EXPECT_EQ(la, lb);
  const std::string summary = d->skipped_summary();
  EXPECT_NE(summary.find("--skip-bad-images replaced 1 read of unreadable images by the next sample (first: " +
                         (dir_ / "train" / "ant" / "1.png").string() + ": "),
            std::string::npos)
      << summary;
}

TEST_F(ImageFiles, TrainingWithSkipBadImagesReportsThemAtTheEnd) {
  for (const char* split : {"train", "val"})
    for (int i = 0; i < 4; ++i) write(cat(split, "/c", i % 2, "/", i, ".png"), encode_png(picture(28, 28, 1, i)));
  write("train/c0/2.png", {'n', 'o', 't'});
  const std::string run = cat(testing::binary_dir(), "/cgdp train --data folder:", dir_.string(),
                              " --batch 4 --test-batch 4 --iterations 2 --plain");
  testing::CommandResult r = testing::run_command(run + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("2.png: neither JPEG nor PNG"), std::string::npos) << r.output;
  r = testing::run_command(run + " --skip-bad-images 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(train): --skip-bad-images replaced "), std::string::npos) << r.output;
}

TEST_F(ImageSources, ConvertedLmdbsReadAsTheFolderRawOrEncoded) {
  make_split("train", 3);
  make_split("val", 2);
  const auto folder = open_dataset(cat("folder:", dir_.string()), Split::Train, {}, options());
  ImageOptions o = options();
  o.classes = 3;
  for (bool encoded : {false, true}) {
    ConvertOptions c;
    c.from = cat("folder:", dir_.string());
    c.to = cat("lmdb:", (dir_ / (encoded ? "enc" : "raw")).string());
    c.encoded = encoded;
    const std::vector<ConvertedDatabase> dbs = convert_images(c);
    ASSERT_EQ(dbs.size(), 2u);
    EXPECT_EQ(dbs[0].records, 9);
    EXPECT_EQ(dbs[1].records, 6);
    const auto lmdb = open_dataset(c.to, Split::Train, {}, o);
    EXPECT_EQ(lmdb->size(), 9);
    EXPECT_EQ(all(*lmdb), all(*folder)) << (encoded ? "encoded" : "raw");
    EXPECT_EQ(open_dataset(c.to, Split::Test, {}, o)->size(), 6);
    EXPECT_THROW(convert_images(c), UsageError);  // never overwritten
  }
}

// cgdp mean: each value is the average of the images' pixel there, in Caffe's BGR planes, whether
// read from the folder or from the LMDB made of it; images of two sizes need --resize.
TEST_F(ImageSources, MeanImageIsThePixelAverageInBgrPlanes) {
  std::vector<Image> pictures;
  for (int i = 0; i < 3; ++i) {
    pictures.push_back(picture(4, 6, 3, 5 * i));
    write(cat("train/c", i % 2, "/", i, ".png"), encode_png(pictures.back()));
  }
  write("val/c0/0.png", encode_png(pictures[0]));
  write("val/c1/0.png", encode_png(pictures[1]));
  const std::string out = (dir_ / "mean.binaryproto").string();
  const std::string mean = cat(testing::binary_dir(), "/cgdp mean --data folder:", dir_.string(), " --out ", out);
  testing::CommandResult r = testing::run_command(mean + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the 3x4x6 mean of 3 images"), std::string::npos) << r.output;
  CaffeTransform t;
  load_mean_file(out, t);
  ASSERT_EQ(t.mean_image.size(), 3u * 4 * 6);
  for (int c : {0, 2})
    for (int y : {0, 3})
      for (int x : {1, 5}) {
        double sum = 0;
        for (const Image& p : pictures) sum += p.at(y, x, 2 - c);  // plane 0 is blue
        EXPECT_FLOAT_EQ(t.mean_image[(c * 4 + y) * 6 + x], static_cast<float>(sum / 3));
      }
  ConvertOptions c;
  c.from = cat("folder:", dir_.string());
  c.to = cat("lmdb:", (dir_ / "db").string());
  convert_images(c);
  ImageOptions o;
  o.channels = 3;
  o.classes = 2;
  const auto lmdb = open_dataset(c.to, Split::Train, {}, o);
  EXPECT_EQ(compute_image_mean(dynamic_cast<const ImageSourceDataset&>(*lmdb), 2).values, t.mean_image);
  write("train/c1/9.png", encode_png(picture(5, 6, 3)));
  r = testing::run_command(mean + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("9.png: image of 5x6 where "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give --resize HxW"), std::string::npos) << r.output;
  r = testing::run_command(mean + " --resize 8x8 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the 3x8x8 mean of 4 images"), std::string::npos) << r.output;
}

// cgdp loader times the loader alone; cgdp profile on image data records its rate per thread,
// which cgdp predict reads.
TEST_F(ImageSources, LoaderRatesAreMeasuredAloneAndInProfiles) {
  for (const char* split : {"train", "val"})
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 4; ++i) write(cat(split, "/c", k, "/", i, ".png"), encode_png(picture(30, 30, 1, i)));
  const std::string data = cat(" --data folder:", dir_.string());
  testing::CommandResult r = testing::run_command(
      cat(testing::binary_dir(), "/cgdp loader", data, " --crop 28 --channels 1 --batch 4 --seconds 0.1 --batches 3 "
          "--loader-threads 2 --json 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rate = nlohmann::json::parse(r.output);
  EXPECT_EQ(rate["threads"], 2);
  EXPECT_GE(rate["images"].get<int>(), 12);  // at least 3 batches of 4
  EXPECT_GT(rate["images_per_s"].get<double>(), 0);
  EXPECT_EQ(rate["sample_shape"], "1x28x28");
  r = testing::run_command(cat(testing::binary_dir(), "/cgdp loader --data synthetic 2>&1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("the loader decodes images"), std::string::npos) << r.output;
  const std::string profile = (dir_ / "p.json").string();
  r = testing::run_command(cat(testing::binary_dir(), "/cgdp profile", data, " --crop 28 --batch 4 --iterations 2 "
                               "--warmup 1 --loader-threads 1 -o ", profile, " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto written = nlohmann::json::parse(read_file(profile));
  EXPECT_GT(written["loader"]["images_per_s_per_thread"].get<double>(), 0);
  EXPECT_EQ(written["loader"]["threads"], 1);
  EXPECT_NE(written["loader"]["data"].get<std::string>().find("1x28x28"), std::string::npos);
}

// Crops of 48x64 JPEGs decode only the crop's rows and columns (from a DCT block's edge); the raw
// records of the same files decode whole. Crops, mirrors and the mean image's place agree.
TEST_F(ImageSources, CropOnlyDecodesReadTheMeanImageAtTheWholeImagesPlace) {
  for (const char* split : {"train", "val"})
    for (int i = 0; i < 6; ++i) write(cat(split, "/c", i % 2, "/", i, ".jpg"), encode_jpeg(picture(48, 64, 3, i), 95));
  ConvertOptions c;
  c.from = cat("folder:", dir_.string());
  c.to = cat("lmdb:", (dir_ / "raw").string());
  convert_images(c);
  ImageOptions o = options(16);
  o.classes = 2;
  for (int i = 0; i < 3 * 48 * 64; ++i) o.transform.mean_image.push_back(static_cast<float>(i % 97));
  o.transform.mean_height = 48;
  o.transform.mean_width = 64;
  const auto folder = open_dataset(c.from, Split::Train, {}, o);
  const auto raw = open_dataset(c.to, Split::Train, {}, o);
  for (int64_t epoch : {0, 1, 2}) EXPECT_EQ(all(*folder, 1, epoch), all(*raw, 1, epoch)) << epoch;
}

TEST_F(ImageSources, LmdbProblemsAreOneLineNamingTheDatabaseOrKey) {
  ImageOptions o = options();
  o.classes = 2;
  auto message = [&](const std::string& spec) {
    try {
      const auto d = open_dataset(spec, Split::Train, {}, o);
      std::vector<float> image(3 * 8 * 8);
      float label;
      for (int64_t i = 0; i < d->size(); ++i) d->read(i, image.data(), &label);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string missing = (dir_ / "none").string();
  EXPECT_EQ(message("lmdb:" + missing), missing + ": no such LMDB folder (a database is never created by reading)");
  EXPECT_FALSE(fs::exists(missing));
  {
    LmdbWriter w((dir_ / "other").string());
    w.put("k1", "\xff\xff not a protobuf");
  }
  EXPECT_NE(message("lmdb:" + (dir_ / "other").string()).find("key 'k1': not a Caffe Datum record"),
            std::string::npos);
  make_split("train", 1);  // labels 0, 1, 2 against a model of 2 classes
  ConvertOptions c;
  c.from = cat("folder:", dir_.string());
  c.to = cat("lmdb:", (dir_ / "db").string());
  convert_images(c);
  EXPECT_NE(message(c.to).find("train_lmdb: key '00000002_cat/0.JPG': label 2 is outside the model's 2 classes"),
            std::string::npos) << message(c.to);
}

// liblmdb trusts its file: a truncated copy was SIGBUS and flipped bits SIGSEGV in `train` and
// `mean`. Now the file is checked before it is mapped: each damaged copy below is either still
// readable or a DataError naming it, and the process lives (a signal would end the test).
TEST_F(ImageSources, DamagedLmdbsAreNamedNotMetWithASignal) {
  const fs::path db = dir_ / "db";
  {
    LmdbWriter w(db.string());
    for (int i = 0; i < 600; ++i)
      w.put(cat("key", 1000 + i), std::string(i % 100 == 0 ? 9000 : 40, 'v'));
  }
  const std::string file = read_file(db / "data.mdb");
  const fs::path copy = dir_ / "copy";
  fs::create_directories(copy);
  auto read_all = [&](const std::string& bytes) {
    std::ofstream(copy / "data.mdb", std::ios::binary | std::ios::trunc) << bytes;
    try {
      LmdbReader r(copy.string());
      size_t total = 0;
      for (size_t i = 0; i < r.keys().size(); ++i) total += r.value(i).size();
      return cat("read ", total);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(read_all(file), cat("read ", 6 * 9000 + 594 * 40));
  EXPECT_NE(read_all(file.substr(0, file.size() / 2))
                .find("data.mdb: truncated or damaged: its meta page names "),
            std::string::npos);
  std::string wrapped = file;  // meta page 1 made the newest, naming page 2^64 - 1 as its last
  std::memset(wrapped.data() + 4096 + 136, 0xff, 16);
  EXPECT_NE(read_all(wrapped).find("data.mdb: truncated or damaged: its meta page names "),
            std::string::npos);
  std::mt19937 rng(7);
  int damaged = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = file;
    for (int k = 0; k < 1 + trial % 8; ++k)
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 << rng() % 8);
    const std::string outcome = read_all(bytes);
    if (outcome.starts_with("read ")) continue;
    EXPECT_EQ(outcome.rfind(copy.string(), 0), 0u) << outcome;  // names the database
    damaged += outcome.find("damaged") != std::string::npos;
  }
  EXPECT_GT(damaged, 30);
}

// tools/fashion_to_folder.py writes lossless PNGs: the folder reads the IDX files' pixels.
TEST_F(ImageFiles, FashionMnistAsAPngFolderReadsAsTheIdxFiles) {
  const testing::CommandResult r = testing::run_command(
      cat(testing::source_dir(), "/tools/fashion_to_folder.py ", dir_.string(), " --limit 40 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ImageOptions o;
  o.channels = 1;
  o.height = o.width = 28;
  o.transform.scale = kPixelScale;
  const auto folder = open_dataset(cat("folder:", dir_.string()), Split::Test, {}, o);
  const auto idx = open_dataset("idx:/usr/share/datasets/fashion-mnist", Split::Test);
  ASSERT_EQ(folder->size(), 40);
  // The folder holds the first 40 test images grouped by class; find each by its file name.
  const auto& entries = dynamic_cast<const ImageDataset&>(*folder).list().entries;
  std::vector<float> a(784), b(784);
  float la, lb;
  for (int64_t i = 0; i < folder->size(); ++i) {
    const int64_t original = std::stoll(fs::path(entries[i].path).stem().string());
    folder->read(i, a.data(), &la);
    idx->read(original, b.data(), &lb);
    ASSERT_EQ(a, b) << entries[i].path;
    ASSERT_EQ(la, lb) << entries[i].path;
  }
}

}  // namespace
}  // namespace cgdp
