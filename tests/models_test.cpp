// The bundled models build, and their learnable parameter totals match the published figures.
#include <gtest/gtest.h>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

// Counted on a device that only counts: VGG-16's 138 M parameters are never filled.
int64_t learnable(const std::string& name) {
  const std::string path = find_model_file(name);
  MeasuringDevice counting;
  Net<float> net(load_model(path), Phase::Train, counting, 1, 1, path);
  return net.learnable_count();
}

TEST(Models, AlexNetHasBvlcParameterCount) { EXPECT_EQ(learnable("alexnet"), 60965224); }
TEST(Models, Vgg16HasPublishedParameterCount) { EXPECT_EQ(learnable("vgg16"), 138357544); }
TEST(Models, ResNet152HasPublishedParameterCount) { EXPECT_EQ(learnable("resnet152"), 60192808); }
TEST(Models, GoogLeNetIsWithinThreePercentOfSevenMillion) {
  const double n = static_cast<double>(learnable("googlenet"));
  EXPECT_NEAR(n, 7.0e6, 0.03 * 7.0e6) << n;
}
TEST(Models, SmallModelsBuildInBothPhases) {
  for (const std::string name : {"fashion_cnn", "resnet_small"})
    for (Phase phase : {Phase::Train, Phase::Test}) {
      const std::string path = find_model_file(name);
      Net<float> net(load_model(path), phase, default_cpu_device(), 2, 1, path);
      EXPECT_GT(net.num_layers(), 3) << name;
    }
}
TEST(Models, AlexNetShapesFollowCaffe) {
  const std::string path = find_model_file("alexnet");
  MeasuringDevice shapes_only;
  Net<float> net(load_model(path), Phase::Train, shapes_only, 1, 1, path);
  EXPECT_EQ(net.blob("conv1")->shape(), (Shape{1, 96, 55, 55}));
  EXPECT_EQ(net.blob("pool5")->shape(), (Shape{1, 256, 6, 6}));
  EXPECT_EQ(net.blob("fc8")->shape(), (Shape{1, 1000}));
}

}  // namespace
}  // namespace cgdp
