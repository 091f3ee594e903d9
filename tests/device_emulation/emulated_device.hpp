// What the emulated CUDA runtime (emulated_runtime.cpp) tells the emulated cuDNN and cuBLAS: which
// GPU a thread or stream is on, and whether an operand lies inside memory that GPU allocated.
// Compiled against the CUDA toolkit's own headers, so that cgdp's CUDA host code, built for a real
// GPU, links against these definitions unchanged (tests/device_emulation/CMakeLists.txt).
// Every operation completes when it is issued, on the issuing thread: one schedule a real GPU may
// run, so host code that is right on a GPU is right here (the converse: stream-order bugs hide).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
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

}  // namespace cgdp_device_emulation
