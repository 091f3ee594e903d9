// Why CUDA cannot start, named with the driver's and the runtime's versions: the messages for each
// answer the runtime can give (made up here, so they are tested without a GPU), and this machine's
// own answer through make_device and `cgdp train --device-kind cuda`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cuda_status.hpp"
#include "cgdp/device/devices.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;

CudaProbe probe(int error, int driver, int devices) {
  return {error, error == 35 ? "cudaErrorInsufficientDriver" : "cudaErrorSystemNotReady",
          "some text", driver, 13000, devices};
}

TEST(WhyNoGpu, NamesTheCauseAndBothVersions) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(why_no_gpu(probe(0, 13000, 4)), "");
  EXPECT_THAT(why_no_gpu(probe(35, 0, 0)),
              HasSubstr("no CUDA driver is installed (libcuda.so not found; this cgdp's CUDA runtime is 13.0)"));
  EXPECT_THAT(why_no_gpu(probe(35, 12040, 0)),
              HasSubstr("the CUDA driver supports CUDA 12.4 but this cgdp's runtime is 13.0: install a newer driver"));
  EXPECT_THAT(why_no_gpu(probe(100, 13000, 0)),
              HasSubstr("the CUDA driver sees no GPU (driver for CUDA 13.0, runtime 13.0; check nvidia-smi"));
  EXPECT_THAT(why_no_gpu(probe(0, 13000, 0)), HasSubstr("the CUDA driver sees no GPU"));
  EXPECT_THAT(why_no_gpu(probe(3, 13000, 0)),
              HasSubstr("cannot use the GPUs: cudaErrorSystemNotReady (some text; driver for CUDA 13.0, runtime 13.0)"));
}

TEST(WhyNoGpu, ThisMachinesAnswerReachesTheUser) {
  const auto r = testing::run_command(cat(testing::binary_dir(), "/cgdp train --device-kind cuda --iterations 1 --plain ",
                                          "--data synthetic --test-samples 10 2>&1"));
  if (cuda_device_count() > 0) {
    EXPECT_EQ(cuda_unavailable_reason(), "");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return;
  }
  const std::string reason = cuda_unavailable_reason();
  ASSERT_FALSE(reason.empty());
  try {
    (void)make_device(DeviceKind::Cuda, 0);
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), "cuda:0: " + reason);
  }
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("cgdp: error: --device-kind cuda: " + reason)) << r.output;
}

}  // namespace
}  // namespace cgdp
