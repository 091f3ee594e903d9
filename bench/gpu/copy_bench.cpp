// Plain pinned cudaMemcpy throughput: the reference bench/gpu/run.sh sets beside cgdp's chunk
// copies. For each size (bytes) on the command line: the median of R copies device-to-host and
// host-to-device between cudaMalloc'd and cudaMallocHost'd memory, timed with CUDA events after
// two untimed copies. Prints one JSON object per size.
// Usage: gpu_copy_bench [--repeats R] SIZE...
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cuda/cuda_check.hpp"

namespace {

// Median milliseconds of `repeats` synchronous copies of `bytes`.
double median_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int repeats) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = -2; r < repeats; ++r) {
    CUDA_CHECK(cudaEventRecord(start, nullptr));
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
    CUDA_CHECK(cudaEventRecord(stop, nullptr));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) times.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int run(int argc, char** argv) {
  int repeats = 20;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      const long long size = std::atoll(arg.c_str());
      if (size <= 0) throw cgdp::UsageError("sizes are positive byte counts, got '" + arg + "'");
      sizes.push_back(static_cast<size_t>(size));
    }
  }
  if (sizes.empty()) throw cgdp::UsageError("usage: gpu_copy_bench [--repeats R] SIZE...");
  const size_t most = *std::max_element(sizes.begin(), sizes.end());
  CUDA_CHECK(cudaSetDevice(0));
  void* device = nullptr;
  void* host = nullptr;
  CUDA_CHECK(cudaMalloc(&device, most));
  CUDA_CHECK(cudaMallocHost(&host, most));
  CUDA_CHECK(cudaMemset(device, 1, most));
  std::fill_n(static_cast<char*>(host), most, char{2});
  for (size_t bytes : sizes) {
    const double d2h = median_ms(host, device, bytes, cudaMemcpyDeviceToHost, repeats);
    const double h2d = median_ms(device, host, bytes, cudaMemcpyHostToDevice, repeats);
    std::printf("{\"bytes\": %zu, \"d2h_ms\": %.6f, \"h2d_ms\": %.6f}\n", bytes, d2h, h2d);
  }
  CUDA_CHECK(cudaFreeHost(host));
  CUDA_CHECK(cudaFree(device));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_copy_bench: error: %s\n", e.what());
    return 1;
  }
}
