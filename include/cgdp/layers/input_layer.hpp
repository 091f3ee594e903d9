// Input: tops filled from outside (the data loader); first dimension is the batch size.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class InputLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int min_bottoms() const override { return 0; }
  int max_bottoms() const override { return 0; }
  int max_tops() const override { return -1; }
  bool is_input() const override { return true; }

  // Overrides the first dimension of every top (the batch size from the command line).
  void set_batch_size(int64_t batch) { batch_ = batch; }
  // Shape of top i as the model file gives it (before the batch override).
  Shape declared_shape(int top_index) const;

 protected:
  void forward_cpu(const RunContext&, const BlobVec<T>&, const BlobVec<T>&) override {}
  void backward_cpu(const RunContext&, const BlobVec<T>&, const std::vector<bool>&,
                    const BlobVec<T>&) override {}
  void forward_cuda(const RunContext&, const BlobVec<T>&, const BlobVec<T>&) override {}
  void backward_cuda(const RunContext&, const BlobVec<T>&, const std::vector<bool>&,
                     const BlobVec<T>&) override {}

 private:
  int64_t batch_ = 0;  // 0: keep the declared first dimension
};

}  // namespace cgdp
