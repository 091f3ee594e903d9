// Caffe's HDF5Data: .h5 files the test writes with the HDF5 library, named by a list file, read row
// for row (float and double datasets, N x D and N x C x H x W), trained from a model file, and the
// files Caffe would refuse named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>
#include <limits>

#include "cgdp/core/error.hpp"
#include "cgdp/data/hdf5_dataset.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using testing::TempDir;
using ::testing::HasSubstr;

template <typename V>
void write_dataset(hid_t file, const char* name, const std::vector<hsize_t>& dims, const std::vector<V>& values) {
  const hid_t type = std::is_same_v<V, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(set);
  H5Sclose(space);
}

// rows x dim samples whose value at (r, k) is `first` + r + k / 10, labels r % classes.
template <typename V>
void write_file(const std::filesystem::path& path, int rows, const std::vector<hsize_t>& sample, int first, int classes) {
  hsize_t per = 1;
  for (hsize_t d : sample) per *= d;
  std::vector<V> data, labels;
  for (int r = 0; r < rows; ++r) {
    for (hsize_t k = 0; k < per; ++k) data.push_back(static_cast<V>(first + r + k / 10.0));
    labels.push_back(static_cast<V>(r % classes));
  }
  std::vector<hsize_t> dims{static_cast<hsize_t>(rows)};
  dims.insert(dims.end(), sample.begin(), sample.end());
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(file, "data", dims, data);
  write_dataset<V>(file, "label", {static_cast<hsize_t>(rows)}, labels);
  H5Fclose(file);
}

TEST(Hdf5Data, RowsOfEveryListedFileInOrder) {
  TempDir dir;
  write_file<float>(dir / "a.h5", 3, {4}, 0, 2);
  write_file<double>(dir / "b.h5", 2, {4}, 100, 2);
  std::ofstream(dir / "list.txt") << (dir / "a.h5").string() << "\n" << (dir / "b.h5").string() << "\n";
  const Hdf5Dataset data((dir / "list.txt").string(), "data", "label");
  ASSERT_EQ(data.size(), 5);
  EXPECT_EQ(data.sample_shape(), (Shape{4, 1, 1}));
  EXPECT_EQ(data.num_classes(), 2);
  float row[4], label = -1;
  data.read(3, row, &label);  // b.h5's first row
  EXPECT_FLOAT_EQ(row[0], 100.f);
  EXPECT_FLOAT_EQ(row[3], 100.3f);
  EXPECT_EQ(label, 0.f);
  data.read(2, row, &label);
  EXPECT_FLOAT_EQ(row[1], 2.1f);
  EXPECT_EQ(label, 0.f);
}

TEST(Hdf5Data, FilesCaffeWouldRefuseAreNamed) {
  TempDir dir;
  write_file<float>(dir / "a.h5", 3, {4}, 0, 2);
  write_file<float>(dir / "wide.h5", 3, {5}, 0, 2);
  std::ofstream(dir / "mixed.txt") << (dir / "a.h5").string() << "\n" << (dir / "wide.h5").string() << "\n";
  EXPECT_THROW(
      {
        try {
          Hdf5Dataset((dir / "mixed.txt").string(), "data", "label");
        } catch (const DataError& e) {
          EXPECT_THAT(e.what(), HasSubstr("wide.h5: samples of 5x1x1 where"));
          throw;
        }
      },
      DataError);
  std::ofstream(dir / "one.txt") << (dir / "a.h5").string() << "\n";
  try {
    Hdf5Dataset((dir / "one.txt").string(), "pixels", "label");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("a.h5: no dataset 'pixels'"));
  }
  std::ofstream(dir / "missing.txt") << "\n" << (dir / "nowhere.h5").string() << "\n";
  try {
    Hdf5Dataset((dir / "missing.txt").string(), "data", "label");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing.txt:2: cannot open"));
  }
  // A NaN sample had trained to NaN weights, or tested as "accuracy 1" behind a ReLU.
  const hid_t file = H5Fcreate((dir / "nan.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset<float>(file, "data", {2, 2},
                       {1.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 4.f});
  write_dataset<float>(file, "label", {2}, {0.f, 1.f});
  H5Fclose(file);
  std::ofstream(dir / "nan.txt") << (dir / "nan.h5").string() << "\n";
  try {
    Hdf5Dataset((dir / "nan.txt").string(), "data", "label");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("nan.h5: dataset 'data' holds nan at element 2: expected finite numbers"));
  }
}

// Caffe's hdf5_classification pattern: HDF5Data layers, an InnerProduct, SoftmaxWithLoss.
TEST(Hdf5Data, TrainsFromAModelFilesLayers) {
  TempDir dir;
  write_file<float>(dir / "train.h5", 40, {1, 2, 2}, 0, 2);
  write_file<float>(dir / "test.h5", 10, {1, 2, 2}, 0, 2);
  std::ofstream(dir / "train.txt") << "train.h5\n";
  std::ofstream(dir / "test.txt") << "test.h5\n";
  const std::string model = R"(
    layer { name: "data" type: "HDF5Data" top: "data" top: "label" include { phase: TRAIN }
            hdf5_data_param { source: "train.txt" batch_size: 8 } }
    layer { name: "data" type: "HDF5Data" top: "data" top: "label" include { phase: TEST }
            hdf5_data_param { source: "test.txt" batch_size: 5 } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )";
  std::ofstream(dir / "m.prototxt") << model;
  const auto r = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                          "/cgdp train --model m.prototxt --iterations 4 --plain 2>&1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("on hdf5:train.txt: 40 train / 10 test samples (train in file order), batch 8"),
            std::string::npos)
      << r.output;
  // shuffle: true, or --order shuffled, visits a new permutation each epoch instead.
  const auto flagged = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                                "/cgdp train --model m.prototxt --iterations 2 --order shuffled --plain 2>&1"));
  EXPECT_NE(flagged.output.find("40 train / 10 test samples, batch 8"), std::string::npos) << flagged.output;
  std::string shuffling = model;
  shuffling.replace(shuffling.find("batch_size: 8"), 13, "batch_size: 8 shuffle: true");
  std::ofstream(dir / "s.prototxt") << shuffling;
  const auto shuffled = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                                 "/cgdp train --model s.prototxt --iterations 2 --plain 2>&1"));
  EXPECT_NE(shuffled.output.find("40 train / 10 test samples, batch 8"), std::string::npos) << shuffled.output;
}

}  // namespace
}  // namespace cgdp
