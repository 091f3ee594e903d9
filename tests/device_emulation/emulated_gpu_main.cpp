// main() of the tests that run on the emulated GPUs: the cases that need a GPU (their names say
// Cuda or cuda), unless --gtest_filter names others.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  GTEST_FLAG_SET(filter, "*Cuda*:*cuda*");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
