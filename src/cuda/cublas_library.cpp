// cuBLAS through dlopen (cublas_library.hpp). The build passes cuBLAS's soname (CGDP_CUBLAS_SONAME)
// and the toolkit's file (CGDP_CUBLAS_PATH), for a loader whose search path lacks its folder.
#include "cublas_library.hpp"

#include <dlfcn.h>

#include <string>

#include "cgdp/core/error.hpp"

// The name a cublas_v2.h macro stands for (cublasSgemm -> "cublasSgemm_v2").
#define CGDP_CUBLAS_NAME(f) CGDP_CUBLAS_QUOTE(f)
#define CGDP_CUBLAS_QUOTE(f) #f

namespace cgdp::cublas {

namespace {

void* open_library() {
  if (void* handle = dlopen(CGDP_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string by_soname = dlerror();
  if (void* handle = dlopen(CGDP_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL)) return handle;
  throw DeviceError(cat("cannot load cuBLAS: ", by_soname, "; ", dlerror()));
}

template <typename F>
void resolve(void* handle, const char* name, F& entry) {
  entry = reinterpret_cast<F>(dlsym(handle, name));
  if (!entry) throw DeviceError(cat("cuBLAS (", CGDP_CUBLAS_SONAME, ") has no ", name));
}

Library load() {
  void* handle = open_library();  // stays open: the process may make handles until it exits
  Library lib{};
  resolve(handle, CGDP_CUBLAS_NAME(cublasCreate), lib.create);
  resolve(handle, CGDP_CUBLAS_NAME(cublasDestroy), lib.destroy);
  resolve(handle, CGDP_CUBLAS_NAME(cublasSetStream), lib.set_stream);
  resolve(handle, CGDP_CUBLAS_NAME(cublasSetMathMode), lib.set_math_mode);
  resolve(handle, CGDP_CUBLAS_NAME(cublasGetStatusString), lib.status_string);
  resolve(handle, CGDP_CUBLAS_NAME(cublasSgemm), lib.sgemm);
  resolve(handle, CGDP_CUBLAS_NAME(cublasDgemm), lib.dgemm);
  resolve(handle, CGDP_CUBLAS_NAME(cublasGemmEx), lib.gemm_ex);
  resolve(handle, CGDP_CUBLAS_NAME(cublasSgemv), lib.sgemv);
  resolve(handle, CGDP_CUBLAS_NAME(cublasDgemv), lib.dgemv);
  return lib;
}

}  // namespace

const Library& library() {
  if (linked_library) return *linked_library();  // a test's emulation (tests/device_emulation/)
  static const Library lib = load();  // a throw leaves it unset: the next call tries again
  return lib;
}

}  // namespace cgdp::cublas
