// cuDNN's three convolution passes with their algorithms found once per problem: the state a
// layer keeps (descriptors, chosen algorithms) and the searches. Convolution runs them as they are;
// Deconvolution with the roles of its input and output swapped. In 16 bits the passes read and
// write 16-bit copies (cuda/half_operands.hpp); the bias stays in T.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cgdp/device/cuda_options.hpp"
#include "cgdp/layers/layer.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "cuda/conv_algorithms.hpp"
#include "cuda/cuda_libraries.hpp"
#include "cuda/cudnn_descriptors.hpp"
#include "cuda/half_operands.hpp"

namespace cgdp {

// x is the convolution's input and y its output (a Deconvolution's output and input), in the
// operands' type (16-bit when the layer multiplies in 16 bits); `output` is the layer's own output
// in T and bias spans its channels: the bias is added and differentiated in T.
struct ConvCuda final : LayerBackendState {
  TensorDescriptor x, y, output, bias;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  Shape shape;                   // the bottom shape the descriptors describe
  CudaOptions options;           // and the settings the algorithms were chosen under
  Precision precision = Precision::kFp32;       // and the layer_precision()
  ConvOperands operands = ConvOperands::kFp32;  // what x, w and y hold
  bool layout_blocks = true;                    // and channel_blocks_enabled()
  // x, w and y as the 16-bit copies order them: channels last (HalfLayout) where the convolution
  // takes them so (ConvolutionLayer::cuda_channels_last), else as the fp32 blobs.
  HalfLayout x_layout, w_layout, y_layout;
  std::vector<int64_t> problem;  // the algorithm cache's key
  std::optional<ConvAlgorithm> forward, backward_data, backward_filter;

  bool half() const { return operands == ConvOperands::kHalf; }
  // Whether the descriptors still describe `bottom` under the current settings.
  bool describes(const Shape& bottom) const {
    return shape == bottom && options == cuda_options() && precision == layer_precision() &&
           layout_blocks == channel_blocks_enabled();
  }
  bool channels_last() const { return x_layout.channels_last; }
  cudnnTensorFormat_t format() const {
    return channels_last() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  }
};

// The operands a layer of T multiplies under layer_precision(), and their cuDNN type.
template <typename T>
ConvOperands conv_operands() {
  if constexpr (std::is_same_v<T, double>) return ConvOperands::kFp64;
  return multiplies_in_half<T>() ? ConvOperands::kHalf : ConvOperands::kFp32;
}
template <typename T>
cudnnDataType_t conv_operand_type(ConvOperands operands) {
  return operands == ConvOperands::kHalf ? cudnn_half_type(layer_precision())
                                         : cudnn_data_type<T>();
}

// Records what the descriptors now describe (`problem`: the layer's cudnn_problem) and forgets the
// algorithms chosen for the old ones.
inline void described(ConvCuda& s, const Shape& bottom, std::vector<int64_t> problem) {
  s.problem = std::move(problem);
  s.forward.reset();
  s.backward_data.reset();
  s.backward_filter.reset();
  s.shape = bottom;
  s.options = cuda_options();
  s.precision = layer_precision();
  s.layout_blocks = channel_blocks_enabled();
}

// The searches: every candidate of a pass timed on the layer's real problem (operands as
// s.operands says), within the scratch cap. Searches use the stream's own scratch
// (stream_workspace), so that a worker never holds more than one: the memory estimate reserves
// the cap once (MemoryEstimate::cudnn_scratch).
ConvAlgorithm find_forward(ConvCuda& s, cudnnHandle_t h, Stream& stream, const void* x,
                           const void* w, void* y, const std::string& what);
// `dx` is the real input gradient (or its 16-bit copy): the pass overwrites it right after.
ConvAlgorithm find_backward_data(ConvCuda& s, cudnnHandle_t h, Stream& stream, const void* w,
                                 const void* dy, void* dx, const std::string& what);
// Searches into a scratch filter gradient of `weights` elements: the real one holds gradients
// being accumulated.
ConvAlgorithm find_backward_filter(ConvCuda& s, cudnnHandle_t h, Device& device, Stream& stream,
                                   const void* x, const void* dy, int64_t weights,
                                   const std::string& what);

}  // namespace cgdp
