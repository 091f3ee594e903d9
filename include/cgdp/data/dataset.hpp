// The dataset interface: a fixed number of labelled images, read one at a time by index.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "cgdp/tensor/shape.hpp"

namespace cgdp {

enum class Split { Train, Test };

const char* to_string(Split split);

// Byte pixels become floats times this, as Caffe's `scale: 0.00390625` (1/256) in its MNIST and
// CIFAR-10 examples does, so 255 maps to 0.99609375 and every value is exact in float.
inline constexpr float kPixelScale = 0.00390625f;

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Where the samples come from, for logs and error messages ("idx:DIR (train)").
  virtual std::string describe() const = 0;
  virtual int64_t size() const = 0;
  // {C, H, W} of one image.
  virtual Shape sample_shape() const = 0;
  virtual int num_classes() const = 0;
  // Writes sample `index`'s C*H*W pixels and its class (as a float) to `label_out`.
  // Thread-safe: loaders of several workers may read at once.
  virtual void read(int64_t index, float* image_out, float* label_out) const = 0;
  // The same for epoch `epoch`: datasets with random transforms draw them from (seed, epoch,
  // index), so a sample's crop does not depend on which thread, worker or run reads it.
  virtual void read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
    read(index, image_out, label_out);
  }

  // What the reader skipped (with --skip-bad-images), for the end of a run; "" when nothing.
  virtual std::string skipped_summary() const { return ""; }
  // Whether a read decodes an image file (worth the loader's whole thread pool) rather than
  // copying bytes already in memory (one thread keeps up).
  virtual bool decodes() const { return false; }

  // C*H*W: floats per image.
  int64_t sample_elements() const { return count_of(sample_shape()); }
};

// What identifies a dataset's contents wherever its files lie: size, shape, classes and a hash of
// the first `samples` samples' pixels and labels. Hosts of one job compare it.
std::string content_summary(const Dataset& dataset, int64_t samples = 16);

// Reads samples `indices` into consecutive rows of `images` ([n, C, H, W]) and `labels` ([n]),
// on `threads` OpenMP threads; `epochs` (empty: epoch 0) gives each row's epoch. If reads throw,
// the error of the lowest row is rethrown.
void read_samples(const Dataset& dataset, std::span<const int64_t> indices, float* images,
                  float* labels, int threads = 1, std::span<const int64_t> epochs = {});

}  // namespace cgdp
