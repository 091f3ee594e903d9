// Launchers for the regression and metric-learning losses (loss_layers.hpp) on the GPU. Each loss
// is summed by one block in a fixed order (float64) and written to a device scalar; backward reads
// the loss weight from the device (the top's diff), so nothing waits for the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// diff = a - b; *loss = sum(diff^2) / (2 batch).
template <typename T>
void euclidean_forward(const T* a, const T* b, T* diff, int64_t n, int64_t batch, T* loss, cudaStream_t stream);
// dx = sign * (*loss_weight) / batch * diff.
template <typename T>
void scaled_by_loss_weight(const T* diff, int64_t n, T sign_over_batch, const T* loss_weight, T* dx, cudaStream_t stream);

// The sigmoid cross-entropy sum over targets != ignore (when has_ignore) divided by Caffe's
// normalizer (mode as proto::LossParameter::NormalizationMode), kept in *normalizer for backward.
template <typename T>
void sigmoid_ce_forward(const T* x, const T* t, int64_t n, bool has_ignore, T ignore, int mode, int64_t outer,
                        T* loss, double* normalizer, cudaStream_t stream);
template <typename T>
void sigmoid_ce_backward(const T* x, const T* t, int64_t n, bool has_ignore, T ignore, const double* normalizer,
                         const T* loss_weight, T* dx, cudaStream_t stream);

// diff = a - b, dist_sq per pair, and the contrastive loss (loss_layers.hpp).
template <typename T>
void contrastive_forward(const T* a, const T* b, const T* similar, int64_t pairs, int64_t dim, T margin, bool legacy,
                         T* diff, T* dist_sq, T* loss, cudaStream_t stream);
template <typename T>
void contrastive_backward(const T* similar, const T* diff, const T* dist_sq, int64_t pairs, int64_t dim, T margin,
                          bool legacy, T sign_over_pairs, const T* loss_weight, T* dx, cudaStream_t stream);

// margins = max(0, 1 + s) and the hinge loss over outer x classes scores, labels decoded.
template <typename T>
void hinge_forward(const T* x, const int64_t* labels, int64_t outer, int64_t classes, bool l2, T* margins, T* loss,
                   cudaStream_t stream);
template <typename T>
void hinge_backward(const T* margins, const int64_t* labels, int64_t outer, int64_t classes, bool l2,
                    const T* loss_weight, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
