// HDF5Data's files through the HDF5 C library: each dataset read whole, converted to float by it.
#include "cgdp/data/hdf5_dataset.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace {

// An HDF5 handle closed by its own close function when it goes.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// The dataset `name` of `file` as floats, with its dimensions.
std::vector<float> read_floats(hid_t file, const std::string& path, const std::string& name, std::vector<hsize_t>& dims) {
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
    throw DataError(cat(path, ": no dataset '", name, "' (HDF5Data reads the datasets its tops name)"));
  const Handle set{H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose};
  const Handle space{H5Dget_space(set.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  if (set.id < 0 || rank < 1) throw DataError(cat(path, ": dataset '", name, "' cannot be read as an array"));
  dims.assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  size_t count = 1;
  for (hsize_t d : dims) count *= d;
  std::vector<float> values(count);
  if (count > 0 && H5Dread(set.id, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
    throw DataError(cat(path, ": dataset '", name, "' is not numeric (HDF5Data reads float data)"));
  // A NaN sample trains to NaN weights, or hides behind a ReLU and tests as "accuracy 1".
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad != values.end())
    throw DataError(cat(path, ": dataset '", name, "' holds ", *bad, " at element ",
                        bad - values.begin(), ": expected finite numbers"));
  return values;
}

}  // namespace

Hdf5Dataset::Hdf5Dataset(const std::string& list_file, const std::string& data_name, const std::string& label_name)
    : description_(cat("hdf5:", list_file)) {
  check_regular_input(list_file);
  std::ifstream list(list_file);
  if (!list) throw DataError(cat(list_file, ": cannot read the list of HDF5 files"));
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as values, not printed
  int line_number = 0;
  for (std::string path; std::getline(list, path);) {
    ++line_number;
    if (path.empty()) continue;
    const Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
    if (file.id < 0) throw DataError(cat(list_file, ":", line_number, ": cannot open '", path, "' as an HDF5 file"));
    std::vector<hsize_t> data_dims, label_dims;
    const std::vector<float> data = read_floats(file.id, path, data_name, data_dims);
    const std::vector<float> labels = read_floats(file.id, path, label_name, label_dims);
    Shape sample(data_dims.begin() + 1, data_dims.end());
    while (sample.size() < 3) sample.push_back(1);
    if (sample.size() > 3) throw DataError(cat(path, ": dataset '", data_name, "' has ", data_dims.size(), " axes; at most 4"));
    if (sample_.empty()) sample_ = sample;
    if (sample != sample_)
      throw DataError(cat(path, ": samples of ", shape_string(sample), " where ", list_file, "'s first file has ",
                          shape_string(sample_)));
    if (labels.size() != data_dims[0] || (label_dims.size() > 1 && label_dims[1] != 1))
      throw DataError(cat(path, ": ", labels.size(), " labels for ", data_dims[0], " samples; give one class per sample"));
    for (size_t r = 0; r < labels.size(); ++r) {
      if (!(labels[r] >= 0) || labels[r] != std::floor(labels[r]))
        throw DataError(cat(path, ": label ", labels[r], " of row ", r, " is not a class (a whole number >= 0)"));
      classes_ = std::max(classes_, static_cast<int>(labels[r]) + 1);
    }
    data_.insert(data_.end(), data.begin(), data.end());
    labels_.insert(labels_.end(), labels.begin(), labels.end());
  }
  if (labels_.empty()) throw DataError(cat(list_file, ": names no HDF5 file with samples"));
}

void Hdf5Dataset::read(int64_t index, float* image_out, float* label_out) const {
  const int64_t n = sample_elements();
  std::memcpy(image_out, data_.data() + index * n, static_cast<size_t>(n) * sizeof(float));
  *label_out = labels_[static_cast<size_t>(index)];
}

}  // namespace cgdp
