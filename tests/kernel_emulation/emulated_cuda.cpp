// The kernel emulator's runtime: launches whose blocks run one after another, each block's threads
// as fibers that switch only at __syncthreads (emulated_cuda.hpp says what it is for and its
// limits), the runtime's errors, and the 16-bit conversions.
#include "emulated_cuda.hpp"

#include <sys/mman.h>

#include "fiber_context.hpp"
#include "runtime_hooks.hpp"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "cgdp/core/error.hpp"
#include "cuda/cuda_check.hpp"

namespace cgdp_emulation {
namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimX = 2147483647u;  // 2^31 - 1
constexpr unsigned kMaxGridDimYZ = 65535;
constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;  // without opting in per kernel
constexpr size_t kStackBytes = 128 * 1024;  // a kernel thread's: small frames, no recursion
constexpr size_t kGuardBytes = 4096;        // below each stack: an overflow faults

std::string describe(const LaunchConfig& c) {
  return cgdp::cat(c.kernel, "<<<(", c.grid.x, ",", c.grid.y, ",", c.grid.z, "), (", c.block.x, ",",
                   c.block.y, ",", c.block.z, "), ", c.dynamic_shared_bytes, ">>> at ", c.site);
}

// ---- errors as the runtime reports them ----
struct ErrorState {
  cudaError_t pending = cudaSuccess;       // what cudaGetLastError returns next
  cudaError_t last_failure = cudaSuccess;  // the last failed launch's error, and its text
  std::string last_failure_text;
};
ErrorState& errors() {
  thread_local ErrorState state;  // per host thread, as CUDA keeps it
  return state;
}

const char* runtime_text(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
  }
  return "unknown error";
}

// What the hardware refuses before running anything: cudaSuccess, or the error a launch returns.
cudaError_t configuration_error(const LaunchConfig& c) {
  const dim3 g = c.grid, b = c.block;
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > kMaxGridDimX || g.y > kMaxGridDimYZ ||
      g.z > kMaxGridDimYZ)
    return cudaErrorInvalidConfiguration;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.z > kMaxBlockDimZ)
    return cudaErrorInvalidConfiguration;
  if (c.dynamic_shared_bytes > kMaxDynamicSharedBytes) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// ---- fibers ----
enum class FiberState { kRunning, kAtBarrier, kFinished };

struct Fiber {
  FiberContext context;  // never moved (ucontext points into itself)
  uint3 thread;
  FiberState state = FiberState::kRunning;
  std::source_location barrier;
};

// Stacks and contexts for a block's threads, made once for the largest block and reused.
class FiberPool {
 public:
  FiberPool() = default;
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;
  ~FiberPool() {
    if (stacks_) munmap(stacks_, kMaxThreadsPerBlock * (kStackBytes + kGuardBytes));
  }
  Fiber* fibers() { return fibers_; }

  // Fiber t's context set to start `entry(t)` on its own stack.
  void prepare(unsigned t, void (*entry)(int)) {
    ensure_stacks();
    Fiber& f = fibers_[t];
    char* stack = stacks_ + t * (kStackBytes + kGuardBytes) + kGuardBytes;
#if defined(__SANITIZE_ADDRESS__)
    // Frames abandoned on a reused stack never unwound: AddressSanitizer's poison of their
    // redzones must not meet the next block's frames.
    __asan_unpoison_memory_region(stack, kStackBytes);
#endif
    f.context.prepare(stack, kStackBytes, entry, static_cast<int>(t));
    f.state = FiberState::kRunning;
  }

 private:
  void ensure_stacks() {
    if (stacks_) return;
    const size_t bytes = kMaxThreadsPerBlock * (kStackBytes + kGuardBytes);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    stacks_ = static_cast<char*>(p);
    for (unsigned t = 0; t < kMaxThreadsPerBlock; ++t)
      mprotect(stacks_ + t * (kStackBytes + kGuardBytes), kGuardBytes, PROT_NONE);
  }

  char* stacks_ = nullptr;
  Fiber fibers_[kMaxThreadsPerBlock];
};

// One block's run: the order's first thread in a fiber first; then either the rest as plain calls,
// or all of them as fibers in rounds from barrier to barrier. Fiber s (its slot) runs the order's
// s-th thread: thread s forward, thread threads - 1 - s in reverse.
class BlockRun {
 public:
  BlockRun(const LaunchConfig& config, ThreadBody body, FiberPool& pool, ThreadOrder order)
      : config_(config), body_(body), pool_(pool), fibers_(pool.fibers()), order_(order) {
    threads_ = config.block.x * config.block.y * config.block.z;
  }

  void run(uint3 block) {
    blockIdx = block;
    failure_ = nullptr;
    live_end_ = 1;
    start_fiber(0);
    resume(0);
    rethrow_failure();
    if (fibers_[0].state == FiberState::kFinished)
      run_rest_as_calls();
    else
      run_as_fibers();
  }

  // __syncthreads from the running thread.
  void barrier(std::source_location where) {
    if (current_ == kNoFiber)
      throw std::logic_error(
          cgdp::cat("divergent __syncthreads at ", where.file_name(), ":", where.line(),
                    ": thread ", thread_text(thread_of(plain_thread_)), " reached it, thread ",
                    thread_text(fibers_[0].thread), " of the block ended without reaching any (",
                    order_name(), " order), in ", block_text()));
    Fiber& f = fibers_[current_];
    f.state = FiberState::kAtBarrier;
    f.barrier = where;
    pass_on(current_);
  }

  static void entry(int index);  // a fiber's first frame

 private:
  static constexpr unsigned kNoFiber = ~0u;

  // The thread index fiber s runs.
  unsigned thread_in_slot(unsigned s) const {
    return order_ == ThreadOrder::kReverse ? threads_ - 1 - s : s;
  }
  const char* order_name() const { return order_ == ThreadOrder::kReverse ? "reverse" : "forward"; }

  uint3 thread_of(unsigned t) const {
    const dim3 b = config_.block;
    return {t % b.x, t / b.x % b.y, t / (b.x * b.y)};
  }
  static std::string thread_text(uint3 t) { return cgdp::cat("(", t.x, ",", t.y, ",", t.z, ")"); }
  std::string block_text() const {
    return cgdp::cat("block ", thread_text(blockIdx), " of ", describe(config_));
  }

  void start_fiber(unsigned s) {
    pool_.prepare(s, &BlockRun::entry);
    fibers_[s].thread = thread_of(thread_in_slot(s));
  }

  // From the scheduler into fiber t; back here when the round it starts ends.
  void resume(unsigned t) {
    current_ = t;
    threadIdx = fibers_[t].thread;
    FiberContext::switch_to(scheduler_, fibers_[t].context);
    current_ = kNoFiber;
  }

  // Fiber t stopped (at a barrier, or done): on to the next live thread of the round, or back to
  // the scheduler after the last.
  void pass_on(unsigned t) {
    unsigned next = t + 1;
    while (next < live_end_ && fibers_[next].state == FiberState::kFinished) ++next;
    FiberContext* to = &scheduler_;
    if (next < live_end_) {
      current_ = next;
      threadIdx = fibers_[next].thread;
      to = &fibers_[next].context;
    }
    FiberContext::switch_to(fibers_[t].context, *to);
  }

  void run_rest_as_calls() {
    for (unsigned s = 1; s < threads_; ++s) {
      plain_thread_ = thread_in_slot(s);
      threadIdx = thread_of(plain_thread_);
      body_();
    }
  }

  void run_as_fibers() {
    for (unsigned s = 1; s < threads_; ++s) start_fiber(s);
    live_end_ = threads_;
    if (threads_ > 1) resume(1);  // fiber 0 waits at its barrier already: the others catch up
    for (;;) {
      rethrow_failure();
      if (!all_at_one_barrier()) return;  // all finished
      for (unsigned t = 0; t < threads_; ++t)
        if (fibers_[t].state == FiberState::kAtBarrier) fibers_[t].state = FiberState::kRunning;
      resume(0);
    }
  }

  // After a round: true if every thread waits at the same barrier, false if all finished; a
  // mix is a divergent barrier.
  bool all_at_one_barrier() const {
    const Fiber& first = fibers_[0];
    for (unsigned t = 1; t < threads_; ++t) {
      const Fiber& f = fibers_[t];
      const bool same =
          f.state == first.state && (f.state == FiberState::kFinished ||
                                     (f.barrier.line() == first.barrier.line() &&
                                      same_file(f.barrier.file_name(), first.barrier.file_name())));
      if (!same)
        throw std::logic_error(cgdp::cat("divergent __syncthreads: thread ",
                                         thread_text(first.thread), " ", where(first), ", thread ",
                                         thread_text(f.thread), " ", where(f), " (", order_name(),
                                         " order), in ", block_text()));
    }
    return first.state == FiberState::kAtBarrier;
  }
  // One barrier's threads share its file name's address; another address may still name it.
  static bool same_file(const char* a, const char* b) { return a == b || std::strcmp(a, b) == 0; }
  static std::string where(const Fiber& f) {
    if (f.state == FiberState::kFinished) return "ended";
    return cgdp::cat("waits at ", f.barrier.file_name(), ":", f.barrier.line());
  }

  void rethrow_failure() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  const LaunchConfig& config_;
  ThreadBody body_;
  FiberPool& pool_;
  Fiber* fibers_;
  ThreadOrder order_;
  unsigned threads_ = 0;
  unsigned live_end_ = 1;        // fibers [0, live_end_) take part in rounds
  unsigned current_ = kNoFiber;  // the running fiber's slot
  unsigned plain_thread_ = 0;    // the thread index a plain call runs
  FiberContext scheduler_;
  std::exception_ptr failure_;
};

BlockRun* g_block = nullptr;  // the block running now (one launch at a time)

void BlockRun::entry(int index) {
  BlockRun& run = *g_block;
  const unsigned t = static_cast<unsigned>(index);
  std::exception_ptr failure;
  try {
    run.body_();
  } catch (...) {  // it cannot unwind past this frame: the scheduler rethrows it
    failure = std::current_exception();
  }
  run.fibers_[t].state = FiberState::kFinished;
  if (failure) {
    run.failure_ = std::move(failure);
    FiberContext::switch_to(run.fibers_[t].context, run.scheduler_);  // never resumed
  }
  run.pass_on(t);
  std::fputs("kernel emulator: a finished thread was resumed\n", stderr);  // a bug here: no way on
  std::abort();
}

std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}
long g_launches = 0;

// CGDP_EMULATED_THREAD_ORDER's order (forward when unset or empty).
ThreadOrder order_from_environment() {
  const char* value = std::getenv("CGDP_EMULATED_THREAD_ORDER");
  if (!value || !*value || std::strcmp(value, "forward") == 0) return ThreadOrder::kForward;
  if (std::strcmp(value, "reverse") == 0) return ThreadOrder::kReverse;
  throw std::invalid_argument(
      cgdp::cat("CGDP_EMULATED_THREAD_ORDER=", value,
                ": the kernel emulator's thread order is forward or reverse"));
}

// The order launches use (under launch_mutex): the environment's, read at the first launch or
// question, until set_thread_order.
struct OrderSetting {
  bool known = false;
  ThreadOrder order = ThreadOrder::kForward;
};
OrderSetting g_order;

ThreadOrder current_order() {
  if (!g_order.known) g_order = {true, order_from_environment()};
  return g_order.order;
}

}  // namespace

bool accept_launch(const LaunchConfig& config) {
  std::lock_guard lock(launch_mutex());
  ++g_launches;
  if (const cudaError_t error = configuration_error(config); error != cudaSuccess) {
    ErrorState& e = errors();
    e.pending = e.last_failure = error;
    e.last_failure_text = cgdp::cat(runtime_text(error), " (launch ", describe(config), ")");
    return false;
  }
  return true;
}

void launch(const LaunchConfig& config, ThreadBody body) {
  if (accept_launch(config)) run_launch(config, body);
}

void run_launch(const LaunchConfig& config, ThreadBody body) {
  std::lock_guard lock(launch_mutex());
  const ThreadOrder order = current_order();
  static FiberPool pool;
  BlockRun run(config, body, pool, order);
  gridDim = config.grid;
  blockDim = config.block;
  g_block = &run;
  struct Reset {
    ~Reset() { g_block = nullptr; }
  } reset;
  for (unsigned z = 0; z < config.grid.z; ++z)
    for (unsigned y = 0; y < config.grid.y; ++y)
      for (unsigned x = 0; x < config.grid.x; ++x) run.run({x, y, z});
}

long launch_count() {
  std::lock_guard lock(launch_mutex());
  return g_launches;
}

ThreadOrder thread_order() {
  std::lock_guard lock(launch_mutex());
  return current_order();
}

void set_thread_order(ThreadOrder order) {
  std::lock_guard lock(launch_mutex());
  g_order = {true, order};
}

}  // namespace cgdp_emulation

void __syncthreads(std::source_location where) {
  if (!cgdp_emulation::g_block) throw std::logic_error("__syncthreads outside a kernel launch");
  cgdp_emulation::g_block->barrier(where);
}

cudaError_t cudaGetLastError() {
  return std::exchange(cgdp_emulation::errors().pending, cudaSuccess);
}

cudaError_t cudaPeekAtLastError() {
  return cgdp_emulation::errors().pending;
}

const char* cudaGetErrorString(cudaError_t error) {
  const auto& e = cgdp_emulation::errors();
  if (error != cudaSuccess && error == e.last_failure) return e.last_failure_text.c_str();
  return cgdp_emulation::runtime_text(error);
}

namespace {
cgdp_emulation::RuntimeHooks runtime_hooks{};
// A hook's failure as the one code this header knows for it.
cudaError_t from_hook(int code) {
  return code == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
}  // namespace

void cgdp_emulation::set_runtime_hooks(const RuntimeHooks& hooks) {
  runtime_hooks = hooks;
}

void cgdp_emulation::run_on_stream(cudaStream_t stream, std::function<void()> work) {
  if (runtime_hooks.run_on_stream)
    runtime_hooks.run_on_stream(stream, std::move(work));
  else
    work();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (runtime_hooks.memcpy_async)
    return from_hook(runtime_hooks.memcpy_async(dst, src, bytes, kind, stream));
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (runtime_hooks.memset_async)
    return from_hook(runtime_hooks.memset_async(dst, value, bytes, stream));
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

// ---- 16-bit conversions, in integers (independent of the compiler's _Float16) ----
namespace {

uint32_t bits_of(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}
float float_of(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// `value` >> `shift`, rounded to nearest even (shift <= 31 bits kept below).
uint32_t shift_right_to_nearest_even(uint32_t value, unsigned shift) {
  if (shift == 0) return value;
  if (shift > 31) return 0;
  const uint32_t kept = value >> shift, rest = value & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1u)));
}

}  // namespace

__nv_bfloat16 __float2bfloat16_rn(float v) {
  const uint32_t bits = bits_of(v);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return {0x7FFF};
  return {static_cast<unsigned short>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16)};
}

float __bfloat162float(__nv_bfloat16 h) {
  return float_of(static_cast<uint32_t>(h.bits) << 16);
}

__half __float2half_rn(float v) {
  const uint32_t bits = bits_of(v);
  const uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return {0x7FFF};
  if (magnitude >= 0x477FF000u)  // 65520 and up: beyond the largest half, 65504
    return {static_cast<unsigned short>(sign | 0x7C00u)};
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | (magnitude >= 0x00800000u ? 0x800000u : 0);
  uint32_t half;
  if (exponent >= -14) {  // normal: 10 of the 23 fraction bits; a carry moves into the exponent
    half = (static_cast<uint32_t>(exponent + 15) << 10) +
           shift_right_to_nearest_even(mantissa, 13) - 0x400u;
  } else {  // subnormal: units of 2^-24 (a carry into 0x400 gives the smallest normal)
    half = shift_right_to_nearest_even(mantissa, static_cast<unsigned>(-exponent - 1));
  }
  return {static_cast<unsigned short>(sign | half)};
}

float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1Fu, fraction = h.bits & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign | 0x7F800000u | (fraction << 13));
  if (exponent != 0) return float_of(sign | ((exponent + 112) << 23) | (fraction << 13));
  const float magnitude = static_cast<float>(fraction) * 0x1p-24f;  // subnormal or zero: exact
  return sign ? -magnitude : magnitude;
}
