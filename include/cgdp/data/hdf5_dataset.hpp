// Caffe's HDF5Data files: a list file of .h5 paths (one a line, relative to the working directory
// as Caffe reads them), each holding a float or double dataset of samples (N x ...) and one of
// class labels (N or N x 1), named as the layer's tops; the rows of all files, in list order.
#pragma once

#include <string>
#include <vector>

#include "cgdp/data/dataset.hpp"

namespace cgdp {

class Hdf5Dataset final : public Dataset {
 public:
  // Reads every file whole. DataError names the file (and the dataset or row) for a missing file or
  // dataset, samples of another shape than the first file's, a row count the labels do not match,
  // or a label that is not a class (a whole number >= 0).
  Hdf5Dataset(const std::string& list_file, const std::string& data_name, const std::string& label_name);

  std::string describe() const override { return description_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  // {C, H, W}: an N x D dataset gives {D, 1, 1}, as the Input of a 4-D net reads it.
  Shape sample_shape() const override { return sample_; }
  int num_classes() const override { return classes_; }
  void read(int64_t index, float* image_out, float* label_out) const override;

 private:
  std::string description_;
  Shape sample_;
  int classes_ = 0;
  std::vector<float> data_, labels_;
};

}  // namespace cgdp
