// What the emulated CUDA runtime (emulated_runtime.cpp) tells the emulated cuDNN and cuBLAS: which
// GPU a thread or stream is on, and whether an operand lies inside memory that GPU allocated.
// Compiled against the CUDA toolkit's own headers, so that cgdp's CUDA host code, built for a real
// GPU, links against these definitions unchanged (tests/device_emulation/CMakeLists.txt).
// Each stream runs its work on a thread of its own, in issue order, beside the host and the other
// streams, as a GPU does: a missing event wait or stream synchronisation reads what was not yet
// written (memory a GPU has just allocated reads as NaN) when the threads' timing exposes it.
// CGDP_EMULATED_STREAMS=lagging holds each stream's work back until something waits for it or the
// host goes idle (lag_scheduler.hpp): a reader's missing wait then shows by schedule, not chance.
// CGDP_EMULATED_STREAMS=inline runs every operation on the issuing thread when it is issued
// instead: one schedule a real GPU may run, for telling a race from a wrong result.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace cgdp_device_emulation {

// The emulated GPU the calling thread has current (cudaSetDevice is per thread, as in CUDA).
int current_device();
// The GPU a stream was made on (the null stream: the calling thread's current one).
int device_of(cudaStream_t stream);

// Whether [ptr, ptr + bytes) lies inside one cudaMalloc allocation of GPU `device`. If not,
// records "<what>: <why>" as the calling thread's problem and returns false.
bool device_range(const void* ptr, size_t bytes, int device, const std::string& what);
// The calling thread's last recorded problem ("" if none); a library's error string adds it.
const std::string& problem();
// Records a problem found outside device_range (a bad argument) and returns false.
bool report(const std::string& what);
// Forgets the calling thread's problem (a call that succeeded).
void clear_problem();

// Runs `work` on `stream` after everything issued to it before, on the stream's own thread (the
// null stream: the calling thread's GPU's legacy default stream, which has a thread of its own
// too and, as CUDA's, does not wait for non-blocking streams). Whatever `work` reads of the
// caller's memory besides device memory and pinned buffers (scalars, descriptors, shapes) must be
// copied into it: it runs after the call returns. An exception from `work` ends the process with
// its message, as an error that a GPU reports later would fail the run.
void enqueue(cudaStream_t stream, std::function<void()> work);
// Blocks until everything issued to `stream` so far has run, as a blocking library call (an
// algorithm search) must.
void finish(cudaStream_t stream);

}  // namespace cgdp_device_emulation
