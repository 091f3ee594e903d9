// IDX reader: big-endian header (magic, dimensions), then the bytes, all loaded into memory.
#include "cgdp/data/idx_dataset.hpp"

#include <cstdio>

#include "cgdp/core/error.hpp"
#include "data_file.hpp"

namespace cgdp {

namespace {

constexpr uint32_t kImageMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr int kClasses = 10;
constexpr int64_t kMaxImagePixels = int64_t{1} << 24;  // guards the size arithmetic

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

void check_magic(GzFile& file, uint32_t expected, const char* kind) {
  const uint32_t magic = file.read_be32("magic number");
  if (magic != expected)
    throw DataError(cat(file.path(), ": expected magic ", hex32(expected), " for an ", kind,
                        " file, got ", hex32(magic)));
}

// Reads exactly `bytes` bytes of `what` and checks that nothing follows them.
std::vector<uint8_t> read_body(GzFile& file, int64_t bytes, const char* what) {
  if (static_cast<uint64_t>(bytes) > file.bytes_left_bound())  // before reading: a gzip bomb
    throw DataError(cat(file.path(), ": expected ", bytes, " bytes of ", what, file.bound_text()));
  std::vector<uint8_t> body;
  const size_t got = file.append(body, static_cast<size_t>(bytes));
  if (static_cast<int64_t>(got) < bytes)
    throw DataError(
        cat(file.path(), ": expected ", bytes, " bytes of ", what, ", file ends after ", got));
  uint8_t extra;
  if (file.read(&extra, 1) != 0)
    throw DataError(cat(file.path(), ": expected ", bytes, " bytes of ", what,
                        ", file holds more; is the header right?"));
  return body;
}

std::string find_idx_file(const std::string& dir, const std::string& stem, const char* what) {
  return find_data_file(dir, {stem + ".gz", stem}, what);
}

}  // namespace

InMemoryDataset load_idx_dataset(const std::string& dir, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";

  GzFile images(find_idx_file(dir, prefix + "-images-idx3-ubyte", "IDX image file"));
  check_magic(images, kImageMagic, "idx3 ubyte image");
  const int64_t count = images.read_be32("image count");
  const int64_t rows = images.read_be32("rows");
  const int64_t cols = images.read_be32("columns");
  if (rows <= 0 || cols <= 0 || rows * cols > kMaxImagePixels)
    throw DataError(cat(images.path(), ": image size ", rows, "x", cols,
                        " is not plausible; expected e.g. 28x28"));
  std::vector<uint8_t> pixels = read_body(images, count * rows * cols, "pixels");

  GzFile labels(find_idx_file(dir, prefix + "-labels-idx1-ubyte", "IDX label file"));
  check_magic(labels, kLabelMagic, "idx1 ubyte label");
  const int64_t label_count = labels.read_be32("label count");
  if (label_count != count)
    throw DataError(cat(labels.path(), " holds ", label_count, " labels but ", images.path(),
                        " holds ", count, " images; expected one label per image"));
  std::vector<uint8_t> label_bytes = read_body(labels, label_count, "labels");
  check_labels(label_bytes.data(), label_count, kClasses, labels.path());

  return InMemoryDataset(cat("idx:", dir, " (", prefix, ")"), Shape{1, rows, cols}, kClasses,
                         std::move(pixels), std::move(label_bytes));
}

}  // namespace cgdp
