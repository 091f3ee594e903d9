// Stochastic pooling: each window outputs one of its inputs with probability proportional to its
// value, the same draw for any split of the batch; sum(x^2) / sum(x) when testing; the gradient
// goes to the input taken.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::error_of;
using ::testing::HasSubstr;

const char* kPool = "name: 'sp' type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 }";

RunContext train(int64_t iteration, int64_t sample_offset = 0) {
  RunContext ctx;
  ctx.phase = Phase::Train;
  ctx.seed = 9;
  ctx.iteration = iteration;
  ctx.sample_offset = sample_offset;
  return ctx;
}

// One window holding 1, 3, 0, 0 takes the 3 three times as often as the 1, and never a 0.
TEST(StochasticPooling, TakesAnInputInProportionToItsValue) {
  Case<double> c(kPool, {{400, 1, 2, 2}}, 1);
  for (int n = 0; n < 400; ++n) {
    double* x = c.bottom[0]->mutable_data() + n * 4;
    x[0] = 1, x[1] = 3, x[2] = 0, x[3] = 0;
  }
  c.setup();
  int threes = 0, ones = 0;
  for (int it = 0; it < 10; ++it) {
    c.forward(train(it));
    for (int n = 0; n < 400; ++n) {
      const double y = c.top[0]->data()[n];
      threes += y == 3, ones += y == 1;
    }
  }
  EXPECT_EQ(threes + ones, 4000);
  EXPECT_NEAR(threes / 4000.0, 0.75, 0.03);
}

// Two slices of a batch (sample_offset) draw what the whole batch draws.
TEST(StochasticPooling, SlicesOfABatchDrawLikeTheWholeBatch) {
  Case<double> whole(kPool, {{4, 3, 4, 4}}, 1), first(kPool, {{2, 3, 4, 4}}, 1), second(kPool, {{2, 3, 4, 4}}, 1);
  for (double& v : whole.bottom[0]->mutable_data_span()) v = std::abs(v);
  std::copy_n(whole.bottom[0]->data(), 96, first.bottom[0]->mutable_data());
  std::copy_n(whole.bottom[0]->data() + 96, 96, second.bottom[0]->mutable_data());
  for (auto* c : {&whole, &first, &second}) c->setup();
  whole.forward(train(5));
  first.forward(train(5, 0));
  second.forward(train(5, 2));
  std::vector<double> joined = first.top_data();
  const auto rest = second.top_data();
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, whole.top_data());
}

TEST(StochasticPooling, TestingWeighsEachInputByItself) {
  Case<double> c(kPool, {{1, 1, 2, 4}}, 1);
  const double x[] = {1, 2, 0, 0, 3, 4, 0, 0};
  std::copy(x, x + 8, c.bottom[0]->mutable_data());
  c.setup();
  RunContext ctx;
  ctx.phase = Phase::Test;
  c.forward(ctx);
  EXPECT_DOUBLE_EQ(c.top[0]->data()[0], (1 + 4 + 9 + 16) / 10.0);
  EXPECT_DOUBLE_EQ(c.top[0]->data()[1], 0.0);  // an all-zero window
  Case<double> smooth(kPool, {{2, 2, 4, 6}}, 1);
  testing::fill_uniform(*smooth.bottom[0], 0.1, 1, 3);
  smooth.setup();
  testing::check_gradients(*smooth.layer, smooth.bottom, smooth.top, {}, ctx);  // cgdp's addition
}

// Overlapping windows (kernel 3, stride 2): an input taken by two windows gets both gradients.
TEST(StochasticPooling, TheGradientGoesToEachTakenInput) {
  Case<double> c("name: 'sp' type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }", {{2, 2, 5, 5}}, 1);
  for (int64_t i = 0; i < c.bottom[0]->count(); ++i) c.bottom[0]->mutable_data()[i] = 1 + (i * 37) % 50;  // distinct per window
  c.setup();
  c.forward(train(1));
  Blob<double>& dy = c.add(c.top[0]->shape());
  testing::fill_uniform(dy, -1, 1, 4);
  std::copy_n(dy.data(), dy.count(), c.top[0]->mutable_diff());
  c.layer->backward(train(1), c.top, {true}, c.bottom);
  std::vector<double> want(static_cast<size_t>(c.bottom[0]->count()), 0.0);
  for (int64_t plane = 0; plane < 4; ++plane)
    for (int ph = 0; ph < 2; ++ph)
      for (int pw = 0; pw < 2; ++pw) {
        const int64_t o = (plane * 2 + ph) * 2 + pw;
        int taken = 0;
        for (int h = 2 * ph; h < 2 * ph + 3; ++h)
          for (int w = 2 * pw; w < 2 * pw + 3; ++w)
            if (c.bottom[0]->data()[plane * 25 + h * 5 + w] == c.top[0]->data()[o] && !taken++)
              want[plane * 25 + h * 5 + w] += c.top[0]->diff()[o];
        EXPECT_EQ(taken, 1) << "output " << o << " is not one input of its window";
      }
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(c.bottom[0]->diff()[i], want[i]) << i;
}

TEST(StochasticPooling, PaddingIsRefusedAsInCaffe) {
  EXPECT_THAT(error_of<ModelError>([] {
                Case<double> c("name: 'sp' type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 pad: 1 }",
                               {{1, 1, 4, 4}}, 1);
                c.setup();
              }),
              HasSubstr("stochastic pooling takes no padding"));
}

}  // namespace
}  // namespace cgdp
