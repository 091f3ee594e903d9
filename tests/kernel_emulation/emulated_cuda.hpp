// A CPU emulation of the CUDA runtime that kernels/*.cu use, so that the real kernel sources,
// their launches converted by convert_launches.py, compile with g++ and run where there is no GPU
// (kernel_emulation_test). What it is for: index arithmetic, bounds, grid-stride loops, launch
// shapes and limits, block-wide reductions through shared memory and __syncthreads, and the
// 16-bit conversions, checked against CPU references.
// How: blocks run one after another; a block's threads run as fibers (ucontext) in a fixed order,
// switching only at __syncthreads, so every run gives the same result. The order is forward (by
// thread index) or reverse (ThreadOrder: CGDP_EMULATED_THREAD_ORDER=reverse in the environment,
// or set_thread_order). The order's first thread runs first; if it ends without reaching a
// barrier, the other threads run as plain calls in the order (fast), and one of them then reaching
// __syncthreads is a divergent barrier: std::logic_error naming the launch.
// Limits: no warps (no shuffles, votes, warp-synchronous code); no memory-model races: a thread
// runs from one barrier to the next before the next thread starts, so a missing __syncthreads
// shows only where the order runs a read before the write it needs (or a write before another
// thread's read of the old value). Forward order misses a lower thread's write that a higher one
// reads (thread 0's broadcast); reverse misses the opposite (a tree reduction's reads of higher
// slots, which it sums correctly in sequence). Between two threads one order or the other exposes
// it, so kernel_emulation_test runs in both (registered once per order); a test still sees it only
// where a stale value reaches an output it checks. No timing, no streams (every call is
// synchronous), no static __shared__ size check (nvcc rejects > 48 KiB), blocks always in grid
// order, one launch at a time per process (launches from several threads take turns).
#pragma once

#if defined(__CUDACC__) || defined(CUDART_VERSION)
#error "emulated_cuda.hpp stands in for the CUDA headers: it must not meet the real ones"
#endif

#include <math.h>  // the C math functions (powf, fabsf, ...) kernels call unqualified

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static  // one copy, shared by the block's fibers; blocks run one at a time

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct double2 {
  double x, y;
};
inline double2 make_double2(double x, double y) {
  return {x, y};
}

// The running thread's coordinates and the launch's shape (globals: one OS thread runs them all).
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

// Waits until every thread of the block got here (where: for divergent-barrier messages).
void __syncthreads(std::source_location where = std::source_location::current());

// ---- the runtime API: errors, copies; streams are null or ignored ----
using cudaStream_t = struct CUstream_st*;
enum cudaError_t {  // the real values
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
// The last launch error, cleared by reading it (launch-configuration errors are not sticky).
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
// The runtime's text; for the last failed launch's error, with that launch's configuration.
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);

// ---- CUDA's min and max for device code (global overloads per type, as its headers declare) ----
#define CGDP_EMULATED_MIN_MAX(T) \
  inline T min(T a, T b) {       \
    return b < a ? b : a;        \
  }                              \
  inline T max(T a, T b) {       \
    return a < b ? b : a;        \
  }
CGDP_EMULATED_MIN_MAX(int)
CGDP_EMULATED_MIN_MAX(unsigned)
CGDP_EMULATED_MIN_MAX(long long)
CGDP_EMULATED_MIN_MAX(unsigned long long)
#undef CGDP_EMULATED_MIN_MAX

// ---- atomics: plain read-modify-write, since threads never interleave inside one ----
template <typename T>
T emulated_atomic(T* address, T value, T (*combine)(T, T)) {
  const T old = *address;
  *address = combine(old, value);
  return old;
}
#define CGDP_EMULATED_ATOMICS(T)                                                            \
  inline T atomicAdd(T* address, T value) {                                                 \
    return emulated_atomic<T>(address, value, [](T a, T b) -> T { return a + b; });         \
  }                                                                                         \
  inline T atomicMin(T* address, T value) {                                                 \
    return emulated_atomic<T>(address, value, [](T a, T b) -> T { return b < a ? b : a; }); \
  }                                                                                         \
  inline T atomicMax(T* address, T value) {                                                 \
    return emulated_atomic<T>(address, value, [](T a, T b) -> T { return a < b ? b : a; }); \
  }
CGDP_EMULATED_ATOMICS(int)
CGDP_EMULATED_ATOMICS(unsigned)
CGDP_EMULATED_ATOMICS(long long)
CGDP_EMULATED_ATOMICS(unsigned long long)
#undef CGDP_EMULATED_ATOMICS
inline float atomicAdd(float* address, float value) {
  return emulated_atomic<float>(address, value, [](float a, float b) { return a + b; });
}
inline double atomicAdd(double* address, double value) {
  return emulated_atomic<double>(address, value, [](double a, double b) { return a + b; });
}

// ---- bit casts and the 16-bit formats, converted as the hardware does ----
inline int __float_as_int(float v) {
  int bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}
inline float __int_as_float(int bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
struct __nv_bfloat16 {
  unsigned short bits;
};
struct __half {
  unsigned short bits;
};
// Round to nearest even; a NaN becomes the canonical NaN (0x7FFF), as cvt.rn does.
__nv_bfloat16 __float2bfloat16_rn(float v);
__half __float2half_rn(float v);
float __bfloat162float(__nv_bfloat16 h);
float __half2float(__half h);
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) {
  return h.bits;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  return {bits};
}
inline unsigned short __half_as_ushort(__half h) {
  return h.bits;
}
inline __half __ushort_as_half(unsigned short bits) {
  return {bits};
}

// ---- launches (what convert_launches.py writes for `kernel<<<grid, block, shared>>>(...)`) ----
namespace cgdp_emulation {

struct LaunchConfig {
  const char* kernel;  // the callee as written, with its template arguments
  const char* site;    // "kernels/x.cu:line"
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;
};

// A non-owning reference to the kernel call each thread makes (cheaper than std::function).
class ThreadBody {
 public:
  template <typename F>
  static ThreadBody calling(F& f) {
    return ThreadBody(&f, [](void* object) { (*static_cast<F*>(object))(); });
  }
  void operator()() const { call_(object_); }

 private:
  ThreadBody(void* object, void (*call)(void*)) : object_(object), call_(call) {}
  void* object_;
  void (*call_)(void*);
};

// Checks the configuration as the hardware does: an invalid one sets cudaGetLastError's error
// and returns false (nothing runs). Counts the launch either way.
bool accept_launch(const LaunchConfig& config);
// Runs every block of an accepted launch, each thread calling body(). Returns once all finished.
void run_launch(const LaunchConfig& config, ThreadBody body);
// Hands an accepted launch's work to its stream (runtime_hooks.hpp): at once, or on the stream's
// thread under the device emulation.
void run_on_stream(cudaStream_t stream, std::function<void()> work);

// Both: checks, then runs every block at once.
void launch(const LaunchConfig& config, ThreadBody body);

// kernel<<<...>>>(args...): the arguments evaluated once, as a launch copies them, then each
// thread calls `kernel` (a lambda calling the kernel by name) with them, on the launch's stream.
template <typename Kernel, typename... Args>
void launch(const LaunchConfig& config, const Kernel& kernel, Args&&... args) {
  if (!accept_launch(config)) return;
  auto values =
      std::make_shared<const std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
  run_on_stream(config.stream, [config, kernel, values] {
    auto body = [&] { std::apply(kernel, *values); };
    run_launch(config, ThreadBody::calling(body));
  });
}

// Launches so far in this process, refused ones included (a test can see that none was made).
long launch_count();

// The order a block's threads run in, between barriers and on the fast path.
enum class ThreadOrder { kForward, kReverse };
// The order launches use now: until set, CGDP_EMULATED_THREAD_ORDER's (forward, the default, or
// reverse), read once; another value throws std::invalid_argument here and at every launch.
ThreadOrder thread_order();
// Sets the order of the launches from now on (a launch in flight keeps its own).
void set_thread_order(ThreadOrder order);

// Sets the order for its lifetime, then restores the one before.
class ScopedThreadOrder {
 public:
  explicit ScopedThreadOrder(ThreadOrder order) : before_(thread_order()) {
    set_thread_order(order);
  }
  ScopedThreadOrder(const ScopedThreadOrder&) = delete;
  ScopedThreadOrder& operator=(const ScopedThreadOrder&) = delete;
  ~ScopedThreadOrder() { set_thread_order(before_); }

 private:
  ThreadOrder before_;
};

}  // namespace cgdp_emulation
