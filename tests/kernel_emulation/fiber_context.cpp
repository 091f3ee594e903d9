// FiberContext (fiber_context.hpp): a stack switch in x86-64 assembly, or glibc's ucontext.
#include "fiber_context.hpp"

#include <cstdint>
#include <cstring>

namespace cgdp_emulation {

#if defined(CGDP_FIBERS_ON_UCONTEXT)

void FiberContext::prepare(char* stack, size_t bytes, void (*entry)(int), int arg) {
  if (!initialized_) {
    getcontext(&context_);
    initialized_ = true;
  }
  context_.uc_stack.ss_sp = stack;
  context_.uc_stack.ss_size = bytes;
  context_.uc_link = nullptr;
  makecontext(&context_, reinterpret_cast<void (*)()>(entry), 1, arg);
}

void FiberContext::switch_to(FiberContext& from, FiberContext& to) {
  swapcontext(&from.context_, &to.context_);
}

#else

extern "C" {
// Pushes the callee-saved registers and the SSE and x87 control words, saves the stack pointer in
// *save, takes `resume` as the stack pointer and pops the same from it: the other side's state.
void cgdp_fiber_switch(void** save, void* resume);
// A prepared fiber's first frame: calls rbx(r12) (entry, arg), which never returns.
void cgdp_fiber_start();
}

asm(R"(
  .text
  .globl cgdp_fiber_switch
  .type cgdp_fiber_switch, @function
cgdp_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cgdp_fiber_switch, .-cgdp_fiber_switch

  .globl cgdp_fiber_start
  .type cgdp_fiber_start, @function
cgdp_fiber_start:
  movq %r12, %rdi
  callq *%rbx
  ud2
  .size cgdp_fiber_start, .-cgdp_fiber_start
)");

// The frame cgdp_fiber_switch pops, lowest address first.
struct StartFrame {
  uint32_t mxcsr;
  uint16_t x87_control, padding[1];
  uint64_t r15, r14, r13, r12, rbx, rbp;
  void (*start)();  // where its ret goes; the stack is then 16-byte aligned, as a call needs
};

void FiberContext::prepare(char* stack, size_t bytes, void (*entry)(int), int arg) {
  auto* frame = reinterpret_cast<StartFrame*>(stack + bytes - sizeof(StartFrame));
  std::memset(frame, 0, sizeof *frame);
  asm volatile("stmxcsr %0" : "=m"(frame->mxcsr));  // the running thread's rounding and masks
  asm volatile("fnstcw %0" : "=m"(frame->x87_control));
  frame->r12 = static_cast<uint64_t>(arg);
  frame->rbx = reinterpret_cast<uint64_t>(entry);
  frame->start = &cgdp_fiber_start;
  stack_pointer_ = frame;
}

void FiberContext::switch_to(FiberContext& from, FiberContext& to) {
  cgdp_fiber_switch(&from.stack_pointer_, to.stack_pointer_);
}

#endif

}  // namespace cgdp_emulation
