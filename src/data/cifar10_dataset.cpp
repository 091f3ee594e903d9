// CIFAR-10 reader: each batch file is read whole, then split into labels and pixel planes.
#include "cgdp/data/cifar10_dataset.hpp"

#include <cstring>

#include "cgdp/core/error.hpp"
#include "data_file.hpp"

namespace cgdp {

namespace {

constexpr int kClasses = 10;
constexpr int64_t kPixels = 3 * 32 * 32;
constexpr int64_t kRecord = 1 + kPixels;

std::vector<std::string> batch_names(Split split) {
  if (split == Split::Test) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back(cat("data_batch_", i, ".bin"));
  return names;
}

// Appends one batch file's records to `pixels` and `labels`.
void read_batch_file(const std::string& path, std::vector<uint8_t>& pixels,
                     std::vector<uint8_t>& labels) {
  GzFile file(path);
  std::vector<uint8_t> raw;
  const uint64_t bound = file.bytes_left_bound();
  if (file.append(raw, bound + 1) > bound)  // past deflate's largest ratio
    throw DataError(cat(path, ": inflates past ", bound, " bytes, more than its size allows"));
  const int64_t bytes = static_cast<int64_t>(raw.size());
  if (bytes == 0 || bytes % kRecord != 0)
    throw DataError(cat(path, ": size ", bytes, " bytes is not a positive multiple of ", kRecord,
                        " (1 label byte + ", kPixels, " pixel bytes per record)"));
  const int64_t records = bytes / kRecord;
  const size_t first_label = labels.size();
  labels.resize(first_label + records);
  const size_t first_pixel = pixels.size();
  pixels.resize(first_pixel + records * kPixels);
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* record = raw.data() + r * kRecord;
    labels[first_label + r] = record[0];
    std::memcpy(pixels.data() + first_pixel + r * kPixels, record + 1, kPixels);
  }
  check_labels(labels.data() + first_label, records, kClasses, path);
}

}  // namespace

InMemoryDataset load_cifar10_dataset(const std::string& dir, Split split) {
  std::vector<uint8_t> pixels, labels;
  for (const std::string& name : batch_names(split))
    read_batch_file(find_data_file(dir, {name}, "CIFAR-10 batch file"), pixels, labels);
  return InMemoryDataset(cat("cifar10:", dir, " (", to_string(split), ")"), Shape{3, 32, 32},
                         kClasses, std::move(pixels), std::move(labels));
}

}  // namespace cgdp
