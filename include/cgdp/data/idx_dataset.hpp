// MNIST-style IDX files (MNIST, Fashion-MNIST): 28x28 byte images and byte labels 0..9.
#pragma once

#include <string>

#include "cgdp/data/in_memory_dataset.hpp"

namespace cgdp {

// Loads <split>-images-idx3-ubyte[.gz] and <split>-labels-idx1-ubyte[.gz] from `dir`, where
// <split> is "train" or "t10k". Throws DataError naming the file and what was expected for a
// missing file, a wrong magic number, a truncated or overlong file, image and label counts that
// differ, or a label above 9.
InMemoryDataset load_idx_dataset(const std::string& dir, Split split);

}  // namespace cgdp
