// cuDNN's three convolution passes with their algorithms found once per problem: the state a
// layer keeps (descriptors, chosen algorithms) and the searches. Convolution runs them as they are;
// Deconvolution with the roles of its input and output swapped.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cgdp/device/cuda_options.hpp"
#include "cgdp/layers/layer.hpp"
#include "cuda/conv_algorithms.hpp"
#include "cuda/cuda_libraries.hpp"
#include "cuda/cudnn_descriptors.hpp"

namespace cgdp {

// x is the convolution's input and y its output (a Deconvolution's output and input); bias spans
// the channels of the layer's output.
struct ConvCuda final : LayerBackendState {
  TensorDescriptor x, y, bias;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  Shape shape;                   // the bottom shape the descriptors describe
  CudaOptions options;           // and the settings the algorithms were chosen under
  std::vector<int64_t> problem;  // the algorithm cache's key
  std::optional<ConvAlgorithm> forward, backward_data, backward_filter;
};

// Scratch for a search: the most any candidate algorithm asks for, within the cap. Searches use
// the stream's own scratch (stream_workspace), so that a worker never holds more than one: the
// memory estimate reserves the cap once (MemoryEstimate::cudnn_scratch).
template <typename SizeOf>
size_t search_scratch(int algorithms, size_t cap, SizeOf size_of) {
  size_t most = 0;
  for (int a = 0; a < algorithms; ++a) {
    size_t bytes = 0;
    if (size_of(a, &bytes) == CUDNN_STATUS_SUCCESS) most = std::max(most, bytes);
  }
  return std::min(most, cap);
}

template <typename T>
ConvAlgorithm find_forward(ConvCuda& s, cudnnHandle_t h, Stream& stream, const T* x, const T* w,
                           T* y, const std::string& what) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(kFloat, s.options)));
  const size_t scratch_bytes = search_scratch(
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, s.options.workspace_limit_bytes, [&](int a, size_t* b) {
        return cudnnGetConvolutionForwardWorkspaceSize(h, s.x.get(), s.w.get(), s.conv.get(),
                                                       s.y.get(), cudnnConvolutionFwdAlgo_t(a), b);
      });
  void* scratch = stream_workspace(stream, scratch_bytes);
  cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, s.x.get(), x, s.w.get(), w, s.conv.get(),
                                                     s.y.get(), y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &found, results, scratch, scratch_bytes));
  stream.synchronize();
  return pick_conv_algorithm(results, found, kFloat, s.options, what);
}

// `dx` is the real input gradient: the pass overwrites it right after.
template <typename T>
ConvAlgorithm find_backward_data(ConvCuda& s, cudnnHandle_t h, Stream& stream, const T* w,
                                 const T* dy, T* dx, const std::string& what) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(kFloat, s.options)));
  const size_t scratch_bytes = search_scratch(
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, s.options.workspace_limit_bytes,
      [&](int a, size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, s.w.get(), s.y.get(), s.conv.get(), s.x.get(), cudnnConvolutionBwdDataAlgo_t(a), b);
      });
  void* scratch = stream_workspace(stream, scratch_bytes);
  cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int found = 0;
  CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      h, s.w.get(), w, s.y.get(), dy, s.conv.get(), s.x.get(), dx,
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, results, scratch, scratch_bytes));
  stream.synchronize();
  return pick_conv_algorithm(results, found, kFloat, s.options, what);
}

// Searches into a scratch filter gradient: the real one holds gradients being accumulated.
template <typename T>
ConvAlgorithm find_backward_filter(ConvCuda& s, cudnnHandle_t h, Device& device, Stream& stream,
                                   const T* x, const T* dy, int64_t weights,
                                   const std::string& what) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(kFloat, s.options)));
  const size_t scratch_bytes =
      search_scratch(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, s.options.workspace_limit_bytes,
                     [&](int a, size_t* b) {
                       return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                           h, s.x.get(), s.y.get(), s.conv.get(), s.w.get(),
                           cudnnConvolutionBwdFilterAlgo_t(a), b);
                     });
  void* scratch = stream_workspace(stream, scratch_bytes);
  DeviceBuffer dw(device, static_cast<size_t>(weights) * sizeof(T));
  cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int found = 0;
  CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      h, s.x.get(), x, s.y.get(), dy, s.conv.get(), s.w.get(), dw.get(),
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, results, scratch, scratch_bytes));
  stream.synchronize();
  return pick_conv_algorithm(results, found, kFloat, s.options, what);
}


}  // namespace cgdp
