// Parameter store layout and initialisation, model shapes and FLOPs, and a tiny MLP overfitting.
#include "trainer/nn/models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "common/error.h"
#include "grad_check.h"
#include "trainer/nn/blas.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/optimizer.h"

namespace braid::trainer {
namespace {

TEST(ParamStoreTest, MlpLayoutIsContiguousAndNamed) {
  auto model = makeMlp(1);
  const auto& views = model->store.paramViews();
  ASSERT_EQ(views.size(), 6u);
  EXPECT_EQ(views[0].name, "fc1.weight");
  EXPECT_EQ(views[0].shape, (std::vector<int>{256, 784}));
  EXPECT_EQ(views[5].name, "fc3.bias");
  size_t offset = 0;
  for (const auto& v : views) {
    EXPECT_EQ(v.offset, offset) << v.name;
    offset += v.size;
  }
  EXPECT_EQ(model->store.numParams(), 235146u);
  EXPECT_EQ(offset, 235146u);
}

TEST(ParamStoreTest, KaimingUniformBoundsAndDeterminism) {
  auto a = makeMlp(7), b = makeMlp(7), c = makeMlp(8);
  const size_t n = a->store.numParams();
  EXPECT_TRUE(std::equal(a->store.params(), a->store.params() + n, b->store.params()));
  EXPECT_FALSE(std::equal(a->store.params(), a->store.params() + n, c->store.params()));
  for (const auto& v : a->store.paramViews()) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(v.fanIn));
    double sumSq = 0.0;
    float maxAbs = 0.0f;
    for (size_t i = 0; i < v.size; ++i) {
      float x = a->store.params()[v.offset + i];
      maxAbs = std::max(maxAbs, std::abs(x));
      sumSq += x * x;
    }
    EXPECT_LE(maxAbs, bound) << v.name;
    if (v.size >= 1000) {
      // U(-b, b) has variance b^2 / 3.
      EXPECT_NEAR(sumSq / v.size, bound * bound / 3.0, 0.05 * bound * bound / 3.0) << v.name;
    }
  }
  EXPECT_EQ(a->store.layoutHash(), c->store.layoutHash());
  EXPECT_NE(a->store.layoutHash(), makeResNet(7)->store.layoutHash());
}

TEST(ParamStoreTest, MisuseIsRefused) {
  ParamStore store;
  store.addParam("w", {2, 2}, Init::kKaimingUniform, 2);
  EXPECT_THROW(store.addParam("w", {2}, Init::kZeros), Error);
  store.finalize(0);
  EXPECT_THROW(store.addParam("v", {2}, Init::kZeros), Error);
  EXPECT_THROW(store.buffer(0), Error);
  EXPECT_THROW(store.value(5), Error);
}

TEST(ModelsTest, ResNetShapesParamsAndFlops) {
  setBlasThreads(1);
  auto model = makeResNet(3);
  EXPECT_EQ(model->store.numParams(), 77754u);
  // 3 batch norms in blocks with projection x 2 + ... : running mean and var per BN channel.
  EXPECT_EQ(model->store.numBuffers() % 2, 0u);
  Tensor x = testing::randomTensor({2, 1, 28, 28}, 4);
  const Tensor& y = model->net.forward(x);
  EXPECT_EQ(y.shape, (std::vector<int>{2, 10}));
  EXPECT_DOUBLE_EQ(model->net.flopsPerSample(), 18691840.0);
  // BN running stats are buffers named after their layer.
  EXPECT_EQ(model->store.bufferViews()[0].name, "stem.bn.running_mean");
}

TEST(ModelsTest, MlpFlopsAndHookOrder) {
  auto model = makeMlp(5);
  Tensor x = testing::randomTensor({3, 1, 28, 28}, 6);
  const Tensor& y = model->net.forward(x);
  EXPECT_EQ(y.shape, (std::vector<int>{3, 10}));
  EXPECT_DOUBLE_EQ(model->net.flopsPerSample(), 469504.0);
  std::vector<size_t> ready;
  model->net.setGradReadyHook([&](size_t from) { ready.push_back(from); });
  Tensor dy = testing::randomTensor({3, 10}, 7);
  model->net.backward(dy);
  const auto& views = model->store.paramViews();
  EXPECT_EQ(ready, (std::vector<size_t>{views[4].offset, views[2].offset, 0}));
}

TEST(ModelsTest, EvalModeUsesRunningStatistics) {
  auto model = makeResNet(9);
  Tensor x = testing::randomTensor({4, 1, 28, 28}, 10);
  model->net.setTraining(false);
  const Tensor a = model->net.forward(x);
  Tensor one({1, 1, 28, 28});
  std::copy(x.data.begin(), x.data.begin() + 784, one.data.begin());
  const Tensor& b = model->net.forward(one);  // eval output of a sample ignores its batch
  for (int k = 0; k < 10; ++k) EXPECT_NEAR(a.data[k], b.data[k], 1e-5);
}

// A small MLP (32-64-10) memorises 64 random samples with random labels: full-batch Adam with
// lr 1e-2 drives the loss below 0.05 within 100 steps (it takes 31 with this seed).
// Deterministic: same seed, same parameters bit for bit.
TEST(ModelsTest, TinyMlpOverfits64Samples) {
  setBlasThreads(1);
  constexpr int kSamples = 64, kSteps = 100;
  constexpr double kTarget = 0.05;
  auto train = [&](uint64_t seed, int* stepsTaken) {
    MlpOptions mo;
    mo.inputs = 32;
    mo.hidden = {64};
    auto model = makeMlp(seed, mo);
    Tensor x = testing::randomTensor({kSamples, 32}, seed + 1);
    std::vector<int32_t> labels(kSamples);
    SplitMix64 rng(seed + 2);
    for (auto& l : labels) l = static_cast<int32_t>(rng.next() % 10);
    OptimizerOptions oo;
    oo.kind = OptimizerKind::kAdam;
    oo.lr = 1e-2f;
    Optimizer opt(oo, model->store.numParams());
    SoftmaxCrossEntropy ce;
    LossResult r;
    int step = 0;
    for (; step < kSteps; ++step) {
      model->store.zeroGrads();
      r = ce.forward(model->net.forward(x), labels);
      if (r.loss < kTarget) break;
      model->net.backward(ce.backward());
      opt.step(model->store.params(), model->store.grads());
    }
    *stepsTaken = step;
    EXPECT_LT(r.loss, kTarget) << "after " << step << " steps";
    EXPECT_EQ(r.correct, kSamples);
    return std::vector<float>(model->store.params(),
                              model->store.params() + model->store.numParams());
  };
  int s1 = 0, s2 = 0;
  auto p1 = train(42, &s1);
  auto p2 = train(42, &s2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(p1, p2);
  std::cout << "tiny MLP reached loss < " << kTarget << " after " << s1 << " steps\n";
}

}  // namespace
}  // namespace braid::trainer
