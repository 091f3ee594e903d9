// oneDNN's own answer (get_effective_cpu_isa), not the CPU's flags: the two differ when the
// kernel refuses AMX or the environment caps oneDNN.
#include "cgdp/layers/bf16_kernel_isa.hpp"

#ifdef CGDP_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace cgdp {

std::string bf16_kernel_isa() {
#ifdef CGDP_HAVE_ONEDNN
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "AMX";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX512_BF16";
    default:
      return "emulated";
  }
#else
  return "";
#endif
}

}  // namespace cgdp
