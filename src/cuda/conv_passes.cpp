// cuDNN's searches for the three convolution passes (cudnnFind*AlgorithmEx on the real problem).
#include "conv_passes.hpp"

#include <algorithm>

namespace cgdp {

namespace {

// Scratch for a search: the most any candidate algorithm asks for, within the cap.
template <typename SizeOf>
size_t search_scratch(int algorithms, size_t cap, SizeOf size_of) {
  size_t most = 0;
  for (int a = 0; a < algorithms; ++a) {
    size_t bytes = 0;
    if (size_of(a, &bytes) == CUDNN_STATUS_SUCCESS) most = std::max(most, bytes);
  }
  return std::min(most, cap);
}

size_t operand_bytes(ConvOperands operands) {
  return operands == ConvOperands::kHalf ? 2 : operands == ConvOperands::kFp32 ? 4 : 8;
}

}  // namespace

ConvAlgorithm find_forward(ConvCuda& s, cudnnHandle_t h, Stream& stream, const void* x,
                           const void* w, void* y, const std::string& what) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(s.operands, s.options)));
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
  return pick_conv_algorithm(results, found, s.operands, s.options, what);
}

ConvAlgorithm find_backward_data(ConvCuda& s, cudnnHandle_t h, Stream& stream, const void* w,
                                 const void* dy, void* dx, const std::string& what) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(s.operands, s.options)));
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
  return pick_conv_algorithm(results, found, s.operands, s.options, what);
}

ConvAlgorithm find_backward_filter(ConvCuda& s, cudnnHandle_t h, Device& device, Stream& stream,
                                   const void* x, const void* dy, int64_t weights,
                                   const std::string& what) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), initial_conv_math(s.operands, s.options)));
  const size_t scratch_bytes =
      search_scratch(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, s.options.workspace_limit_bytes,
                     [&](int a, size_t* b) {
                       return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                           h, s.x.get(), s.y.get(), s.conv.get(), s.w.get(),
                           cudnnConvolutionBwdFilterAlgo_t(a), b);
                     });
  void* scratch = stream_workspace(stream, scratch_bytes);
  DeviceBuffer dw(device, static_cast<size_t>(weights) * operand_bytes(s.operands));
  cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int found = 0;
  CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      h, s.x.get(), x, s.y.get(), dy, s.conv.get(), s.w.get(), dw.get(),
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, results, scratch, scratch_bytes));
  stream.synchronize();
  return pick_conv_algorithm(results, found, s.operands, s.options, what);
}

}  // namespace cgdp
