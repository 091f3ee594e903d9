// cuBLAS opens on first use (cuda/cublas_library.hpp): a process that never multiplies on a GPU
// does not load it, and the first use reaches the real library. Needs no GPU: loading cuBLAS and
// asking it for a status string or a handle work without one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#ifdef CGDP_HAVE_CUDA
#include "cuda/cublas_library.hpp"
#endif

namespace cgdp {
namespace {

#ifdef CGDP_HAVE_CUDA
std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}

// First in this file, so that no case before it has opened cuBLAS when the binary runs whole.
TEST(CublasLibrary, LoadsOnFirstUseOnly) {
  EXPECT_EQ(mapped_files().find("libcublas"), std::string::npos) << "cuBLAS was loaded at start";
  const cublas::Library& lib = cublas::library();
  EXPECT_NE(mapped_files().find("libcublasLt"), std::string::npos);
  EXPECT_EQ(&cublas::library(), &lib) << "resolved once";
}

TEST(CublasLibrary, EveryEntryPointIsCublassOwn) {
  const cublas::Library& lib = cublas::library();
  for (const void* entry :
       {(void*)lib.create, (void*)lib.destroy, (void*)lib.set_stream, (void*)lib.set_math_mode,
        (void*)lib.status_string, (void*)lib.sgemm, (void*)lib.dgemm, (void*)lib.gemm_ex,
        (void*)lib.sgemv, (void*)lib.dgemv})
    EXPECT_NE(entry, nullptr);
  EXPECT_STREQ(lib.status_string(CUBLAS_STATUS_INVALID_VALUE),
               "an unsupported value or parameter was passed to the function");
  // Without a GPU cuBLAS refuses the handle; with one it makes it.
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = lib.create(&handle);
  if (created == CUBLAS_STATUS_SUCCESS)
    EXPECT_EQ(lib.destroy(handle), CUBLAS_STATUS_SUCCESS);
  else
    EXPECT_EQ(created, CUBLAS_STATUS_NOT_INITIALIZED) << lib.status_string(created);
}
#else
TEST(CublasLibrary, LoadsOnFirstUseOnly) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace
}  // namespace cgdp
