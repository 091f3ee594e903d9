// issue_sum: host threads on the CPU backend, the sum kernel (kernels/sum.cu) on CUDA.
#include "cgdp/sync/device_sum.hpp"

#include "cgdp/core/error.hpp"

#include "cgdp/sync/host_sum.hpp"

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_stream.hpp"
#include "sum.cuh"
#endif

namespace cgdp {

void issue_sum(Stream& stream, DeviceKind kind, float* dst, std::vector<const float*> srcs,
               int64_t n) {
  if (kind == DeviceKind::Cpu) {
    stream.submit([dst, srcs = std::move(srcs), n] { sum_buffers(dst, srcs, n, 0); });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit([&] {
    kernels::sum_buffers(dst, srcs.data(), static_cast<int>(srcs.size()), n, native_stream(stream));
  });
#else
  throw DeviceError(cat("stream '", stream.name(), "': this cgdp was built without CUDA"));
#endif
}

}  // namespace cgdp
