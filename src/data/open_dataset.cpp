// Dataset specs: "scheme:argument" strings dispatched to the readers.
#include "cgdp/data/open_dataset.hpp"

#include <charconv>
#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/core/fit_int32.hpp"
#include "cgdp/data/cifar10_dataset.hpp"
#ifdef CGDP_HAVE_HDF5
#include "cgdp/data/hdf5_dataset.hpp"
#endif
#include "cgdp/data/idx_dataset.hpp"
#include "cgdp/data/image/lmdb_dataset.hpp"

namespace cgdp {

namespace {

constexpr const char* kKnownSchemes =
    "idx:DIR, cifar10:DIR, folder:DIR, list:FILE[,ROOT], lmdb:DIR|TRAIN,VAL, hdf5:LIST[,DATA,LABEL], synthetic, "
    "synthetic:C,H,W,CLASSES";

// hdf5:LIST[,DATA,LABEL]: Caffe's HDF5Data files, the datasets named DATA and LABEL (default data,
// label).
std::unique_ptr<Dataset> open_hdf5(const std::string& argument, const std::string& spec) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t comma = argument.find(',', at);
    parts.push_back(argument.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (parts.size() != 1 && parts.size() != 3)
    throw UsageError(cat("data source '", spec, "': expected hdf5:LIST or hdf5:LIST,DATA,LABEL"));
#ifdef CGDP_HAVE_HDF5
  return std::make_unique<Hdf5Dataset>(parts[0], parts.size() == 3 ? parts[1] : "data",
                                       parts.size() == 3 ? parts[2] : "label");
#else
  throw UsageError(cat("data source '", spec, "': this cgdp was built without HDF5 (CGDP_WITH_HDF5=OFF)"));
#endif
}

// Parses "C,H,W,CLASSES" into `spec`.
void parse_synthetic_shape(const std::string& text, const std::string& whole, SyntheticSpec& spec) {
  int64_t values[4];
  const char* at = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 4; ++i) {
    auto [next, error] = std::from_chars(at, end, values[i]);
    const bool separator_ok = i < 3 ? (next != end && *next == ',') : next == end;
    if (error != std::errc() || !separator_ok)
      throw UsageError(
          cat("data source '", whole, "': expected synthetic:C,H,W,CLASSES with four integers"));
    at = next + 1;
  }
  spec.channels = values[0];
  spec.height = values[1];
  spec.width = values[2];
  spec.num_classes = fit_int32(values[3], cat("data source '", whole, "': classes"));
}

// folder:DIR: DIR/train and DIR/val, each a class-per-folder tree with the same classes.
std::unique_ptr<Dataset> open_image_folder(const std::string& dir, Split split, ImageOptions images) {
  const std::string train_dir = (std::filesystem::path(dir) / "train").string();
  ImageList list = scan_image_folder(train_dir);
  if (split == Split::Test) {
    const std::vector<std::string> train_classes = list.classes;
    list = scan_image_folder((std::filesystem::path(dir) / "val").string());
    if (list.classes != train_classes)
      throw DataError(cat(dir, "/val has ", list.classes.size(), " classes, ", dir, "/train ",
                          train_classes.size(), "; the class folders must be the same"));
  }
  images.train = split == Split::Train;
  const std::string description = cat("folder:", dir, " (", to_string(split), ")");
  return std::make_unique<ImageDataset>(std::move(list), std::move(images), description);
}

// list:FILE[,ROOT]: one Caffe ImageData list; the same for both splits unless --test-data.
std::unique_ptr<Dataset> open_image_list(const std::string& argument, Split split, ImageOptions images) {
  const size_t comma = argument.find(',');
  const std::string file = argument.substr(0, comma);
  const std::string root = comma == std::string::npos ? "" : argument.substr(comma + 1);
  images.train = split == Split::Train;
  const std::string description = cat("list:", argument, " (", to_string(split), ")");
  return std::make_unique<ImageDataset>(read_image_list(file, root), std::move(images), description);
}

// lmdb:DIR (DIR/train_lmdb and DIR/val_lmdb, or DIR itself for both), or lmdb:TRAIN,VAL.
std::unique_ptr<Dataset> open_lmdb(const std::string& argument, Split split, ImageOptions images) {
  namespace fs = std::filesystem;
  std::string path;
  if (const size_t comma = argument.find(','); comma != std::string::npos) {
    path = split == Split::Train ? argument.substr(0, comma) : argument.substr(comma + 1);
  } else {
    const fs::path side = fs::path(argument) / (split == Split::Train ? "train_lmdb" : "val_lmdb");
    std::error_code ec;
    path = fs::is_directory(side, ec) ? side.string() : argument;
  }
  images.train = split == Split::Train;
  const std::string description = cat("lmdb:", path, " (", to_string(split), ")");
  return std::make_unique<LmdbDataset>(path, std::move(images), description);
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split,
                                      const SyntheticSpec& synthetic_defaults,
                                      const ImageOptions& images) {
  const size_t colon = spec.find(':');
  const std::string scheme = spec.substr(0, colon);
  const std::string argument = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const bool has_argument = colon != std::string::npos;

  if (scheme == "synthetic") {
    SyntheticSpec synthetic = synthetic_defaults;
    if (has_argument) parse_synthetic_shape(argument, spec, synthetic);
    if (split == Split::Test) synthetic.seed += 1;
    return std::make_unique<SyntheticDataset>(synthetic);
  }
  if ((scheme == "idx" || scheme == "cifar10" || scheme == "folder" || scheme == "list" ||
       scheme == "lmdb" || scheme == "hdf5") &&
      argument.empty())
    throw UsageError(cat("data source '", spec, "': expected ",
                         scheme == "list" ? "list:FILE[,ROOT]" : scheme + ":DIR"));
  if (scheme == "idx") return std::make_unique<InMemoryDataset>(load_idx_dataset(argument, split));
  if (scheme == "cifar10")
    return std::make_unique<InMemoryDataset>(load_cifar10_dataset(argument, split));
  if (scheme == "folder") return open_image_folder(argument, split, images);
  if (scheme == "list") return open_image_list(argument, split, images);
  if (scheme == "lmdb") return open_lmdb(argument, split, images);
  if (scheme == "hdf5") return open_hdf5(argument, spec);
  throw UsageError(
      cat("data source '", spec, "': unknown scheme '", scheme, "'; known: ", kKnownSchemes));
}

}  // namespace cgdp
