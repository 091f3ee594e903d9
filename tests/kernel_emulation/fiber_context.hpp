// A fiber's saved context and the switch from one to another, for the kernel emulator's block
// threads. On x86-64 a few instructions save the callee-saved registers and swap stacks: glibc's
// swapcontext also saves the signal mask with a system call each time, which took three quarters
// of the emulated GPU's test time. Sanitizer builds keep swapcontext, which the sanitizers know.
#pragma once

#include <cstddef>

#if !defined(__x86_64__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CGDP_FIBERS_ON_UCONTEXT 1
#include <ucontext.h>
#endif

namespace cgdp_emulation {

class FiberContext {
 public:
  FiberContext() = default;
  FiberContext(const FiberContext&) = delete;  // ucontext points into itself
  FiberContext& operator=(const FiberContext&) = delete;

  // The next switch to this context calls entry(arg) on [stack, stack + bytes), which must be
  // 16-byte aligned at its end; entry never returns (it switches away).
  void prepare(char* stack, size_t bytes, void (*entry)(int), int arg);
  // Saves the running context in `from` and resumes `to`; returns when something switches back.
  static void switch_to(FiberContext& from, FiberContext& to);

 private:
#if defined(CGDP_FIBERS_ON_UCONTEXT)
  ucontext_t context_;
  bool initialized_ = false;
#else
  void* stack_pointer_ = nullptr;  // where the switch saved the registers
#endif
};

}  // namespace cgdp_emulation
