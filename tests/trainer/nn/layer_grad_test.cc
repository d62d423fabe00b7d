// Every layer's backward against central finite differences (see grad_check.h).
//
// Tolerance: norm-wise relative error < 1e-3 over all input elements and over all parameters.
// Layers compute in float32, the loss is summed in float64; with h = 1e-2 the float32 rounding
// contributes ~1e-5 and the truncation error O(h^2) ~1e-4 at most, so 1e-3 has margin while a
// wrong term (missing factor, wrong index) gives errors of order 1e-1 or more. Blocks with ReLUs
// after batch norm use h = 1e-3 and skip the few components whose window [x-h, x+h] crosses a
// ReLU kink (detected by comparing with h/4; at most 10% skipped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "common/error.h"
#include "grad_check.h"
#include "trainer/nn/batch_norm.h"
#include "trainer/nn/blas.h"
#include "trainer/nn/conv2d.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/nn/pooling.h"
#include "trainer/nn/relu.h"
#include "trainer/nn/residual.h"

namespace braid::trainer {
namespace {

using testing::gradCheck;
using testing::GradCheckOptions;
using testing::randomTensor;

constexpr double kTol = 1e-3;

// Replaces the store's initial values with random ones so that, e.g., batch-norm gamma != 1.
void randomizeParams(ParamStore& store, uint64_t seed, float lo = -0.8f, float hi = 0.8f) {
  SplitMix64 rng(seed);
  for (size_t i = 0; i < store.numParams(); ++i) store.params()[i] = rng.uniform(lo, hi);
}

class LayerGradTest : public ::testing::Test {
 protected:
  void SetUp() override { setBlasThreads(1); }
};

TEST_F(LayerGradTest, Linear) {
  ParamStore store;
  Linear layer(store, "fc", 5, 4);
  store.finalize(1);
  auto r = gradCheck(layer, store, randomTensor({3, 5}, 2), 3);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
  EXPECT_EQ(r.checked, 15u + 24u);
}

TEST_F(LayerGradTest, LinearOnImageInput) {
  ParamStore store;
  Linear layer(store, "fc", 12, 3);
  store.finalize(4);
  auto r = gradCheck(layer, store, randomTensor({2, 3, 2, 2}, 5), 6);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
}

TEST_F(LayerGradTest, Relu) {
  ParamStore store;
  store.finalize(0);
  Relu layer;
  // Keep every input at least 0.1 away from the kink so x +- h never crosses it.
  Tensor x = randomTensor({4, 10}, 7);
  for (float& v : x.data) v = v >= 0 ? v + 0.1f : v - 0.1f;
  auto r = gradCheck(layer, store, x, 8);
  EXPECT_LT(r.inputRelErr, kTol);
}

struct ConvCase {
  int in, out, kernel, stride, pad, h, w;
  bool bias;
};

class ConvGradTest : public LayerGradTest, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(ConvGradTest, MatchesFiniteDifferences) {
  const ConvCase c = GetParam();
  ParamStore store;
  Conv2d layer(store, "conv", c.in, c.out, c.kernel, c.stride, c.pad, c.bias);
  store.finalize(11);
  auto r = gradCheck(layer, store, randomTensor({2, c.in, c.h, c.w}, 12), 13);
  EXPECT_LT(r.inputRelErr, kTol) << layer.describe();
  EXPECT_LT(r.paramRelErr, kTol) << layer.describe();
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvGradTest,
                         ::testing::Values(ConvCase{3, 4, 3, 2, 1, 7, 7, true},   // stride 2, pad 1
                                           ConvCase{2, 3, 3, 1, 1, 5, 6, true},   // same size
                                           ConvCase{2, 3, 3, 1, 0, 5, 5, false},  // valid
                                           ConvCase{3, 2, 1, 2, 0, 6, 6, false},  // 1x1 proj
                                           ConvCase{1, 2, 5, 3, 2, 8, 7, true}));

TEST_F(LayerGradTest, Conv2dForwardMatchesDirectSum) {
  ParamStore store;
  Conv2d layer(store, "conv", 2, 3, 3, 2, 1, true);
  store.finalize(21);
  Tensor x = randomTensor({2, 2, 5, 6}, 22);
  const Tensor& y = layer.forward(x);
  ASSERT_EQ(y.shape, (std::vector<int>{2, 3, 3, 3}));
  const float* w = store.value(0);
  const float* b = store.value(1);
  for (int n = 0; n < 2; ++n) {
    for (int o = 0; o < 3; ++o) {
      for (int oh = 0; oh < 3; ++oh) {
        for (int ow = 0; ow < 3; ++ow) {
          double sum = b[o];
          for (int c = 0; c < 2; ++c) {
            for (int i = 0; i < 3; ++i) {
              for (int j = 0; j < 3; ++j) {
                int ih = oh * 2 - 1 + i, iw = ow * 2 - 1 + j;
                if (ih < 0 || ih >= 5 || iw < 0 || iw >= 6) continue;
                sum += w[((o * 2 + c) * 3 + i) * 3 + j] * x.data[((n * 2 + c) * 5 + ih) * 6 + iw];
              }
            }
          }
          EXPECT_NEAR(y.data[((n * 3 + o) * 3 + oh) * 3 + ow], sum, 1e-5);
        }
      }
    }
  }
}

TEST_F(LayerGradTest, ForwardValuesByHand) {
  ParamStore store;
  Linear fc(store, "fc", 2, 2);
  store.finalize(0);
  std::vector<float> w = {1, 2, 3, 4}, b = {0.5f, -1};
  std::copy(w.begin(), w.end(), store.value(0));
  std::copy(b.begin(), b.end(), store.value(1));
  Tensor x({1, 2});
  x.data = {1, -1};
  EXPECT_EQ(fc.forward(x).data, (std::vector<float>{-0.5f, -2.0f}));  // (1-2+.5, 3-4-1)

  MaxPool2d pool(2, 2);
  Tensor img({1, 1, 2, 4});
  img.data = {1, 5, -1, -2, 3, 2, -3, -4};
  EXPECT_EQ(pool.forward(img).data, (std::vector<float>{5, -1}));
  Tensor g({1, 1, 1, 2});
  g.data = {10, 20};
  EXPECT_EQ(pool.backward(g).data, (std::vector<float>{0, 10, 20, 0, 0, 0, 0, 0}));

  GlobalAvgPool avg;
  EXPECT_EQ(avg.forward(img).data, (std::vector<float>{0.125f}));  // 1 / 8
}

TEST_F(LayerGradTest, BatchNormTrainingMode) {
  ParamStore store;
  BatchNorm2d layer(store, "bn", 3);
  store.finalize(31);
  randomizeParams(store, 32, 0.5f, 1.5f);
  auto r = gradCheck(layer, store, randomTensor({4, 3, 3, 2}, 33, -2.0f, 3.0f), 34);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
}

TEST_F(LayerGradTest, BatchNormEvalMode) {
  ParamStore store;
  BatchNorm2d layer(store, "bn", 2);
  store.finalize(41);
  randomizeParams(store, 42, 0.5f, 1.5f);
  store.buffer(2)[0] = 0.3f;  // running mean of channel 0
  store.buffer(3)[1] = 2.0f;  // running var of channel 1
  layer.setTraining(false);
  auto r = gradCheck(layer, store, randomTensor({3, 2, 2, 2}, 43), 44);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
}

TEST_F(LayerGradTest, BatchNormStatisticsAndRunningUpdate) {
  ParamStore store;
  BatchNorm2d layer(store, "bn", 2);
  store.finalize(0);
  Tensor x = randomTensor({4, 2, 3, 3}, 51, -1.0f, 5.0f);
  const Tensor& y = layer.forward(x);
  for (int c = 0; c < 2; ++c) {
    double mean = 0, var = 0, ymean = 0, yvar = 0;
    std::vector<double> vals, outs;
    for (int n = 0; n < 4; ++n) {
      for (int i = 0; i < 9; ++i) {
        vals.push_back(x.data[(n * 2 + c) * 9 + i]);
        outs.push_back(y.data[(n * 2 + c) * 9 + i]);
      }
    }
    for (size_t i = 0; i < vals.size(); ++i) mean += vals[i] / 36, ymean += outs[i] / 36;
    for (size_t i = 0; i < vals.size(); ++i) {
      var += (vals[i] - mean) * (vals[i] - mean) / 36;
      yvar += (outs[i] - ymean) * (outs[i] - ymean) / 36;
    }
    EXPECT_NEAR(ymean, 0.0, 1e-5);
    EXPECT_NEAR(yvar, var / (var + 1e-5), 1e-4);
    // Running stats after one step from (0, 1) with momentum 0.1; unbiased variance.
    EXPECT_NEAR(store.buffer(2)[c], 0.1 * mean, 1e-5);
    EXPECT_NEAR(store.buffer(3)[c], 0.9 + 0.1 * var * 36 / 35, 1e-5);
  }
  EXPECT_EQ(store.numParams(), 4u);  // running stats are buffers, not parameters
  EXPECT_EQ(store.numBuffers(), 4u);
}

TEST_F(LayerGradTest, MaxPool) {
  ParamStore store;
  store.finalize(0);
  for (auto [k, s, h] : {std::tuple{2, 2, 6}, std::tuple{3, 2, 7}}) {
    MaxPool2d layer(k, s);
    // Distinct values 0.05 apart (a shuffled ramp), so +-h never changes a window's maximum.
    Tensor x({2, 2, h, h});
    std::iota(x.data.begin(), x.data.end(), 0.0f);
    SplitMix64 rng(61);
    for (size_t i = x.numel() - 1; i > 0; --i) std::swap(x.data[i], x.data[rng.next() % (i + 1)]);
    for (float& v : x.data) v *= 0.05f;
    auto r = gradCheck(layer, store, x, 62);
    EXPECT_LT(r.inputRelErr, kTol) << layer.describe();
  }
}

TEST_F(LayerGradTest, GlobalAvgPoolAndFlatten) {
  ParamStore store;
  store.finalize(0);
  GlobalAvgPool pool;
  auto r1 = gradCheck(pool, store, randomTensor({2, 3, 4, 5}, 71), 72);
  EXPECT_LT(r1.inputRelErr, kTol);
  Flatten flat;
  auto r2 = gradCheck(flat, store, randomTensor({2, 3, 2, 2}, 73), 74);
  EXPECT_LT(r2.inputRelErr, kTol);
  EXPECT_EQ(flat.forward(randomTensor({2, 3, 2, 2}, 1)).shape, (std::vector<int>{2, 12}));
}

TEST_F(LayerGradTest, ResidualBlockWithProjection) {
  ParamStore store;
  ResidualBlock block(store, "block", 3, 4, 2);
  store.finalize(81);
  ASSERT_TRUE(block.hasProjection());
  GradCheckOptions options;
  options.h = 1e-3;
  options.kinkAware = true;
  auto r = gradCheck(block, store, randomTensor({2, 3, 6, 6}, 82), 83, options);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
  EXPECT_LE(r.skipped * 10, r.checked + r.skipped) << "too many kinks skipped";
}

TEST_F(LayerGradTest, ResidualBlockIdentity) {
  ParamStore store;
  ResidualBlock block(store, "block", 3, 3, 1);
  store.finalize(91);
  ASSERT_FALSE(block.hasProjection());
  GradCheckOptions options;
  options.h = 1e-3;
  options.kinkAware = true;
  auto r = gradCheck(block, store, randomTensor({2, 3, 5, 5}, 92), 93, options);
  EXPECT_LT(r.inputRelErr, kTol);
  EXPECT_LT(r.paramRelErr, kTol);
  EXPECT_LE(r.skipped * 10, r.checked + r.skipped) << "too many kinks skipped";
}

// The whole (tiny) ResNet in training mode: checks the wiring of Sequential, residual blocks,
// pooling and the classifier. Stacked float32 batch norms with few values per channel amplify
// rounding (measured errors ~1e-3 at h = 1e-3), so this one uses 1e-2; a wiring mistake gives
// errors of order 1.
TEST_F(LayerGradTest, WholeTinyResNet) {
  ResNetOptions options;
  options.stageChannels = {2, 3};
  options.classes = 3;
  auto model = makeResNet(101, options);
  GradCheckOptions check;
  check.h = 1e-3;
  check.kinkAware = true;
  auto r = gradCheck(model->net, model->store, randomTensor({4, 1, 6, 6}, 102), 103, check);
  EXPECT_LT(r.inputRelErr, 1e-2);
  EXPECT_LT(r.paramRelErr, 1e-2);
  EXPECT_LE(r.skipped * 10, r.checked + r.skipped) << "too many kinks skipped";
}

TEST_F(LayerGradTest, SoftmaxCrossEntropy) {
  const int n = 4, k = 5;
  Tensor logits = randomTensor({n, k}, 111, -3.0f, 3.0f);
  std::vector<int32_t> labels = {0, 3, 4, 1};
  SoftmaxCrossEntropy ce;
  ce.forward(logits, labels);
  const Tensor grad = ce.backward();
  std::vector<double> num, ana;
  const double h = 1e-2;
  for (size_t i = 0; i < logits.numel(); ++i) {
    const float saved = logits.data[i];
    logits.data[i] = saved + h;
    const double plus = ce.forward(logits, labels).loss;
    logits.data[i] = saved - h;
    const double minus = ce.forward(logits, labels).loss;
    logits.data[i] = saved;
    num.push_back((plus - minus) / (2 * h));
    ana.push_back(grad.data[i]);
  }
  EXPECT_LT(testing::relativeError(num, ana), kTol);
}

TEST_F(LayerGradTest, SoftmaxCrossEntropyValues) {
  // Hand-computed: logits (0, ln 3) for label 1 -> p = (1/4, 3/4), loss -ln(3/4).
  Tensor logits({2, 2});
  logits.data = {0.0f, std::log(3.0f), 1000.0f, 0.0f};  // second row: stable at large logits
  std::vector<uint8_t> labels = {1, 1};
  SoftmaxCrossEntropy ce;
  LossResult r = ce.forward(logits, labels);
  EXPECT_NEAR(r.loss, (-std::log(0.75) + 1000.0) / 2.0, 1e-4);
  EXPECT_EQ(r.correct, 1);
  EXPECT_EQ(r.count, 2);
  const Tensor& g = ce.backward(2.0f);  // scale 2 cancels the 1/N of N = 2
  EXPECT_NEAR(g.data[0], 0.25, 1e-6);
  EXPECT_NEAR(g.data[1], -0.25, 1e-6);
  EXPECT_NEAR(g.data[2], 1.0, 1e-6);
  EXPECT_NEAR(g.data[3], -1.0, 1e-6);
  std::vector<int32_t> bad = {0, 2};
  EXPECT_THROW(ce.forward(logits, bad), Error);
}

}  // namespace
}  // namespace braid::trainer
