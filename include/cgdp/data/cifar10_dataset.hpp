// CIFAR-10 binary batches: records of one label byte and 3x32x32 pixel bytes (R, G, B planes).
#pragma once

#include <string>

#include "cgdp/data/in_memory_dataset.hpp"

namespace cgdp {

// Loads data_batch_1.bin .. data_batch_5.bin (train) or test_batch.bin (test) from `dir`.
// Throws DataError naming the file for a missing file, a size that is not a positive multiple
// of 3073 bytes, or a label above 9 (with its record number in that file).
InMemoryDataset load_cifar10_dataset(const std::string& dir, Split split);

}  // namespace cgdp
