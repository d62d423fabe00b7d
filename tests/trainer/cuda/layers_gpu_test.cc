// Each device layer against its CPU twin (trainer/nn) from the same parameters and inputs:
// forward, dx, the parameter gradients (added to random ones already there) and the running
// statistics, elementwise, float32 without TF32, outputs NaN-poisoned so a missed element fails.
// Then the loss and the optimizers against nn's. fp16: Linear and Conv2d on half operands against
// the same float32 CPU layers, within half's rounding of the norm.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "tests/trainer/cuda/gpu_check.h"
#include "trainer/cuda/device_loss.h"
#include "trainer/cuda/device_model.h"
#include "trainer/cuda/device_optimizer.h"
#include "trainer/nn/batch_norm.h"
#include "trainer/nn/conv2d.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/optimizer.h"
#include "trainer/nn/pooling.h"
#include "trainer/nn/relu.h"
#include "trainer/nn/residual.h"

namespace braid::trainer::cuda {
namespace {

using gputest::compare;
using gputest::randomFloats;
using gputest::randomTensor;

constexpr double kLayerTol = 1e-4;  // float32, another summation order
// A residual block chains two convolutions and batch norms; their roundings add up.
constexpr double kBlockTol = 5e-4;

std::vector<float> toHost(const float* device, size_t n, const CudaContext& ctx) {
  std::vector<float> v(n);
  copyToHost(v.data(), device, n, ctx.stream());
  ctx.synchronize();
  return v;
}

// A one-layer (or few-layer) model around `add`, its parameters and buffers made random so no
// layer sees the trivial initial batch-norm statistics.
std::unique_ptr<Model> layerModel(const std::function<void(Model&)>& add) {
  auto m = std::make_unique<Model>();
  m->name = "layer";
  add(*m);
  m->store.finalize(21);
  auto p = randomFloats(m->store.numParams(), 22, -0.5f, 0.5f);
  std::copy(p.begin(), p.end(), m->store.params());
  auto b = randomFloats(m->store.numBuffers(), 23, 0.5f, 1.5f);
  std::copy(b.begin(), b.end(), m->store.buffers());
  return m;
}

// fp16's tolerance: half operands (11-bit significands) with float32 accumulation, relative to
// the norm.
constexpr double kHalfTol = 1e-2;

// Forward and backward of the model on the CPU and on the device; "" when all agree. `half`:
// the device in fp16, compared by norms (compareNorm) instead of elementwise.
std::string checkLayer(const std::function<void(Model&)>& add, const std::vector<int>& inputShape,
                       bool training, double tol, bool half = false) {
  auto cpu = layerModel(add);
  ContextOptions options = gputest::exactOptions();
  options.halfCompute = half;
  CudaContext ctx(options);
  const auto compare = [half](const std::string& what, const float* want, const float* got,
                              size_t count, double t) {
    return half ? gputest::compareNorm(what, want, got, count, t)
                : gputest::compare(what, want, got, count, t);
  };
  const auto compareTensors = [&compare](const std::string& what, const Tensor& want,
                                         const Tensor& got, double t) -> std::string {
    if (want.shape != got.shape) {
      return what + ": shape " + shapeString(got.shape) + ", want " + shapeString(want.shape);
    }
    return compare(what, want.data.data(), got.data.data(), want.numel(), t);
  };
  DeviceModel dev(*cpu, ctx);  // the buffers before the CPU forward updates them
  cpu->net.setTraining(training);
  dev.setTraining(training);
  const size_t n = cpu->store.numParams();
  const auto g0 = randomFloats(n, 24);  // backward must add to what is there
  std::copy(g0.begin(), g0.end(), cpu->store.grads());
  copyToDevice(dev.grads(), g0.data(), n, ctx.stream());

  const Tensor x = randomTensor(inputShape, 25);
  const Tensor y = cpu->net.forward(x);
  DeviceTensor dx;
  upload(x, dx, ctx);
  std::string err = compareTensors("forward", y, download(dev.forward(dx), ctx), tol);

  const Tensor dy = randomTensor(y.shape, 26);
  const Tensor dxWant = cpu->net.backward(dy);
  DeviceTensor ddy;
  upload(dy, ddy, ctx);
  err += compareTensors(" dx", dxWant, download(dev.backward(ddy), ctx), tol);
  if (n > 0) {
    std::vector<float> want(cpu->store.grads(), cpu->store.grads() + n);
    std::vector<float> got = toHost(dev.grads(), n, ctx);
    if (half) {  // the norm of what backward added, not of the random start's
      for (size_t i = 0; i < n; ++i) {
        want[i] -= g0[i];
        got[i] -= g0[i];
      }
    }
    err += compare(" parameter gradients", want.data(), got.data(), n, tol);
  }
  if (cpu->store.numBuffers() > 0) {
    err += compare(" running statistics", cpu->store.buffers(),
                   toHost(dev.buffers(), cpu->store.numBuffers(), ctx).data(),
                   cpu->store.numBuffers(), tol);
  }
  return err;
}

TEST(DeviceLayers, Linear) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Linear>(m.store, "fc", 37, 23); };
  EXPECT_EQ(checkLayer(add, {5, 37}, true, kLayerTol), "");
  EXPECT_EQ(checkLayer(add, {1, 37}, true, kLayerTol), "");
}

TEST(DeviceLayers, LinearOnImages) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Linear>(m.store, "fc", 48, 7); };
  EXPECT_EQ(checkLayer(add, {3, 3, 4, 4}, true, kLayerTol), "");
}

TEST(DeviceLayersFp16, Linear) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Linear>(m.store, "fc", 37, 23); };
  EXPECT_EQ(checkLayer(add, {5, 37}, true, kHalfTol, true), "");
  auto wide = [](Model& m) { m.net.emplace<Linear>(m.store, "fc", 784, 128); };
  EXPECT_EQ(checkLayer(wide, {32, 784}, true, kHalfTol, true), "");
}

TEST(DeviceLayers, ReluAndFlatten) {
  BRAID_REQUIRE_TRAINER_GPU();
  EXPECT_EQ(checkLayer([](Model& m) { m.net.emplace<Relu>(); }, {4, 3, 5, 5}, true, kLayerTol), "");
  EXPECT_EQ(checkLayer([](Model& m) { m.net.emplace<Flatten>(); }, {3, 2, 4, 4}, true, kLayerTol),
            "");
}

TEST(DeviceLayers, GlobalAvgPool) {
  BRAID_REQUIRE_TRAINER_GPU();
  EXPECT_EQ(
      checkLayer([](Model& m) { m.net.emplace<GlobalAvgPool>(); }, {3, 5, 4, 4}, true, kLayerTol),
      "");
}

TEST(DeviceLayers, Conv2d3x3Stride1NoBias) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 3, 8, 3, 1, 1, false); };
  EXPECT_EQ(checkLayer(add, {4, 3, 9, 9}, true, kLayerTol), "");
}

TEST(DeviceLayers, Conv2d3x3Stride2WithBias) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 4, 6, 3, 2, 1, true); };
  EXPECT_EQ(checkLayer(add, {3, 4, 11, 11}, true, kLayerTol), "");
}

TEST(DeviceLayers, Conv2d1x1Stride2) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 4, 8, 1, 2, 0, false); };
  EXPECT_EQ(checkLayer(add, {2, 4, 7, 7}, true, kLayerTol), "");
}

TEST(DeviceLayersFp16, Conv2d) {
  BRAID_REQUIRE_TRAINER_GPU();
  EXPECT_EQ(
      checkLayer([](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 3, 8, 3, 1, 1, false); },
                 {4, 3, 9, 9}, true, kHalfTol, true),
      "");
  EXPECT_EQ(
      checkLayer([](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 4, 6, 3, 2, 1, true); },
                 {3, 4, 11, 11}, true, kHalfTol, true),
      "");
  EXPECT_EQ(
      checkLayer([](Model& m) { m.net.emplace<Conv2d>(m.store, "conv", 16, 32, 1, 2, 0, false); },
                 {4, 16, 8, 8}, true, kHalfTol, true),
      "");
}

TEST(DeviceLayers, Conv2dTheResNetStem) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<Conv2d>(m.store, "stem", 1, 16, 3, 1, 1, false); };
  EXPECT_EQ(checkLayer(add, {8, 1, 28, 28}, true, kLayerTol), "");
}

TEST(DeviceLayers, BatchNorm2dTrainingAndEval) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<BatchNorm2d>(m.store, "bn", 6); };
  EXPECT_EQ(checkLayer(add, {5, 6, 4, 4}, true, kLayerTol), "") << "training";
  EXPECT_EQ(checkLayer(add, {5, 6, 4, 4}, false, kLayerTol), "") << "eval";
  EXPECT_EQ(checkLayer(add, {7, 6}, true, kLayerTol), "") << "[N, C] input";
  // More values per channel than a block has threads, and more than one pass of them.
  EXPECT_EQ(checkLayer(add, {4, 6, 28, 28}, true, kLayerTol), "") << "28x28";
}

TEST(DeviceLayers, ResidualBlockIdentityShortcut) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<ResidualBlock>(m.store, "block", 8, 8, 1); };
  EXPECT_EQ(checkLayer(add, {2, 8, 6, 6}, true, kBlockTol), "");
}

TEST(DeviceLayers, ResidualBlockProjection) {
  BRAID_REQUIRE_TRAINER_GPU();
  auto add = [](Model& m) { m.net.emplace<ResidualBlock>(m.store, "block", 4, 8, 2); };
  EXPECT_EQ(checkLayer(add, {3, 4, 7, 7}, true, kBlockTol), "") << "training";
  EXPECT_EQ(checkLayer(add, {3, 4, 7, 7}, false, kBlockTol), "") << "eval";
}

TEST(DeviceLoss, SoftmaxCrossEntropyMatchesTheCpu) {
  BRAID_REQUIRE_TRAINER_GPU();
  CudaContext ctx(gputest::exactOptions());
  Tensor logits = randomTensor({37, 10}, 31);
  for (float& z : logits.data) z *= 4.0f;
  logits.data[5 * 10 + 2] = logits.data[5 * 10 + 7] = 9.0f;  // a tie: the first wins
  std::vector<int32_t> labels(37);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7) % 10);
  labels[5] = 2;
  SoftmaxCrossEntropy cpu;
  const LossResult want = cpu.forward(logits, labels);
  const Tensor dWant = cpu.backward(0.5f);

  DeviceSoftmaxCrossEntropy dev(ctx);
  DeviceTensor dl;
  upload(logits, dl, ctx);
  dev.forward(dl, labels);
  const LossResult got = dev.result();
  EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::max(1.0, want.loss));
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(compare("dlogits", dWant, download(dev.backward(0.5f), ctx), 1e-5), "");

  labels[3] = 10;  // outside [0, 10)
  dev.forward(dl, labels);
  try {
    dev.result();
    ADD_FAILURE() << "label 10 of 10 classes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 3"), std::string::npos) << e.what();
  }
}

void checkOptimizer(OptimizerOptions o) {
  constexpr size_t kN = 1000;
  CudaContext ctx(gputest::exactOptions());
  std::vector<float> params = randomFloats(kN, 41);
  Optimizer cpu(o, kN);
  DeviceOptimizer dev(o, kN, ctx);
  DeviceBuffer<float> dp(kN), dg(kN);
  copyToDevice(dp.data(), params.data(), kN, ctx.stream());
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> grads = randomFloats(kN, 42 + step);
    cpu.step(params.data(), grads.data());
    copyToDevice(dg.data(), grads.data(), kN, ctx.stream());
    dev.stepRange(dp.data(), dg.data(), 400, kN, ctx.stream());  // two buckets, high one first
    dev.stepRange(dp.data(), dg.data(), 0, 400, ctx.stream());
    dev.finishStep();
    EXPECT_EQ(compare(std::string(optimizerKindName(o.kind)) + " step " + std::to_string(step),
                      params, toHost(dp.data(), kN, ctx), 1e-5),
              "");
  }
  EXPECT_EQ(dev.stepCount(), cpu.stepCount());
}

TEST(DeviceOptimizer, SgdWithMomentumAndWeightDecay) {
  BRAID_REQUIRE_TRAINER_GPU();
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weightDecay = 0.01f;
  checkOptimizer(o);
  o.momentum = 0.0f;
  checkOptimizer(o);
}

TEST(DeviceOptimizer, AdamAndAdamW) {
  BRAID_REQUIRE_TRAINER_GPU();
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01f;
  o.weightDecay = 0.01f;
  o.warmupSteps = 2;
  checkOptimizer(o);
  o.kind = OptimizerKind::kAdamW;
  checkOptimizer(o);
}

}  // namespace
}  // namespace braid::trainer::cuda
