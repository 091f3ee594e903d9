// Which instructions oneDNN's bf16 kernels run on here, as the start line names them.
#pragma once

#include <string>

namespace cgdp {

// "AMX" or "AVX512_BF16" as oneDNN dispatches its bf16 kernels (AMX also needs the OS to grant
// its tile state; ONEDNN_MAX_CPU_ISA can cap it), "emulated" below them, "" in a build without
// oneDNN.
std::string bf16_kernel_isa();

}  // namespace cgdp
