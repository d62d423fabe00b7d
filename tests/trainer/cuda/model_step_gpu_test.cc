// A whole training step of the bundled models on the device against the CPU model from the same
// seed: loss, correct count, gradients, parameters after SGD or Adam, batch-norm statistics; two
// steps, the optimizer stepped per bucket behind DeviceGradSync (one rank: nothing to average).
// fp16: the same steps with half GEMMs and convolutions, a loss scale and the scaled step,
// against the CPU's float32 steps by norms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/trainer/cuda/gpu_check.h"
#include "trainer/cuda/device_grad_sync.h"
#include "trainer/cuda/device_loss.h"
#include "trainer/cuda/device_model.h"
#include "trainer/cuda/device_optimizer.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/nn/optimizer.h"
#include "trainer/train/loss_scaler.h"

namespace braid::trainer::cuda {
namespace {

using gputest::compare;

std::vector<float> toHost(const float* device, size_t n, const CudaContext& ctx) {
  std::vector<float> v(n);
  copyToHost(v.data(), device, n, ctx.stream());
  ctx.synchronize();
  return v;
}

struct StepCase {
  std::string model;
  OptimizerKind optimizer;
  int batch;
  double gradTol;     // gradients, relative to the largest
  double paramTol;    // parameters after the step, relative to the largest
  bool half = false;  // fp16, every check by norms (compareNorm)
};

// fp16's loss scale here: large enough to matter, small enough that no step overflows.
constexpr float kTestScale = 1024.0f;

void checkSteps(const StepCase& c) {
  auto cpu = makeModel(c.model, 5);
  ContextOptions options = gputest::exactOptions();
  options.halfCompute = c.half;
  CudaContext ctx(options);
  const auto compare = [&c](const std::string& what, const float* want, const float* got,
                            size_t count, double tol) {
    return c.half ? gputest::compareNorm(what, want, got, count, tol)
                  : gputest::compare(what, want, got, count, tol);
  };
  LossScalerOptions so;
  so.initScale = kTestScale;
  LossScaler scaler(so);
  DeviceModel dev(*cpu, ctx);
  const size_t n = cpu->store.numParams();

  OptimizerOptions oo;
  oo.kind = c.optimizer;
  oo.lr = c.optimizer == OptimizerKind::kSgd ? 0.05f : 1e-3f;
  oo.weightDecay = 1e-4f;
  Optimizer cpuOpt(oo, n);
  DeviceOptimizer devOpt(oo, n, ctx);
  std::vector<size_t> offsets;
  for (const ParamView& v : cpu->store.paramViews()) offsets.push_back(v.offset);
  DeviceGradSync sync(nullptr, ctx, dev.grads(), offsets, n, 20000);  // several buckets
  sync.setHalfPrecision(c.half);
  dev.setGradReadyHook([&sync](size_t from) { sync.onGradReady(from); });

  std::vector<int> shape = {c.batch};
  shape.insert(shape.end(), cpu->inputShape.begin(), cpu->inputShape.end());
  SoftmaxCrossEntropy cpuCe;
  DeviceSoftmaxCrossEntropy devCe(ctx);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(c.model + " step " + std::to_string(step));
    const Tensor x = gputest::randomTensor(shape, 50 + step);
    std::vector<int32_t> labels(c.batch);
    for (int i = 0; i < c.batch; ++i) labels[i] = (i * 3 + step) % 10;

    cpu->store.zeroGrads();
    const LossResult want = cpuCe.forward(cpu->net.forward(x), labels);
    cpu->net.backward(cpuCe.backward());
    cpuOpt.step(cpu->store.params(), cpu->store.grads());

    dev.zeroGrads();
    DeviceTensor dx;
    upload(x, dx, ctx);
    sync.arm();
    devCe.forward(dev.forward(dx), labels);
    if (c.half) {
      dev.backward(devCe.backward(scaler.scale()));
      EXPECT_FALSE(sync.stepScaled(devOpt, dev.params(), scaler));
      EXPECT_EQ(scaler.scale(), kTestScale);
    } else {
      dev.backward(devCe.backward());
      sync.step(devOpt, dev.params());
    }
    const LossResult got = devCe.result();

    const double lossTol = c.half ? 1e-2 : 1e-4;
    EXPECT_NEAR(got.loss, want.loss, lossTol * std::max(1.0, want.loss));
    // fp16 may tip an argmax between near-tied logits.
    EXPECT_NEAR(got.correct, want.correct, c.half ? 2 : 0);
    EXPECT_EQ(
        compare("gradients", cpu->store.grads(), toHost(dev.grads(), n, ctx).data(), n, c.gradTol),
        "");
    EXPECT_EQ(compare("parameters", cpu->store.params(), toHost(dev.params(), n, ctx).data(), n,
                      c.paramTol),
              "");
    const size_t nb = cpu->store.numBuffers();
    if (nb > 0) {
      EXPECT_EQ(compare("running statistics", cpu->store.buffers(),
                        toHost(dev.buffers(), nb, ctx).data(), nb, c.half ? 1e-2 : 1e-4),
                "");
    }
  }
  EXPECT_EQ(sync.buckets().size() > 1, true);
}

// SGD keeps the gradients' relative error in the parameters. Adam's update is about lr x sign(g)
// for a gradient near 0, so a gradient within rounding of 0 may step either way: 2 x lr = 2e-3
// against parameters up to ~1 (batch-norm gamma), hence the looser parameter tolerance there (the
// Adam kernel itself is checked tightly in layers_gpu_test).
TEST(DeviceModelStep, MlpSgd) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"mlp", OptimizerKind::kSgd, 16, 1e-4, 1e-4});
}

TEST(DeviceModelStep, MlpAdam) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"mlp", OptimizerKind::kAdam, 16, 1e-4, 3e-3});
}

TEST(DeviceModelStep, ResNetSgd) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"resnet", OptimizerKind::kSgd, 8, 1e-3, 1e-4});
}

TEST(DeviceModelStep, ResNetAdam) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"resnet", OptimizerKind::kAdam, 8, 1e-3, 3e-3});
}

// fp16 against float32, by norms. Half operands round to ~5e-4 relative, but a gradient is a sum
// over the batch whose terms largely cancel, so its error relative to its own size is far larger:
// the same MLP's gradients with half-rounded GEMM operands (as here and under PyTorch's autocast)
// against float64, emulated in NumPy at batch 16, differ by 3.2% of their norm. The ResNet's
// batch norms subtract each channel's mean from convolution outputs rounded to half, which
// multiplies that rounding by mean / std: on an H200 (2026-11-27) its gradients differed from the
// CPU's by 4.0% at step 0 and 10.6% at step 1 (after an SGD step from those gradients), while
// training to the same test accuracy as float32 (bench/RESULTS.md). SGD's parameters, mostly
// unchanged by one step, agree far closer. Adam's first steps move each parameter by about
// lr x sign(g): where half flips the sign of a near-zero gradient that parameter is 2e-3 off,
// against parameters of ~0.02 (the MLP's initialisation), so a few percent of flips shows as ~1e-2
// of the norm, and step 1's gradients (from those parameters) differ by more.
TEST(DeviceModelStepFp16, MlpSgd) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"mlp", OptimizerKind::kSgd, 16, 5e-2, 2e-3, true});
}

TEST(DeviceModelStepFp16, MlpAdam) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"mlp", OptimizerKind::kAdam, 16, 5e-2, 3e-2, true});
}

TEST(DeviceModelStepFp16, ResNetSgd) {
  BRAID_REQUIRE_TRAINER_GPU();
  checkSteps({"resnet", OptimizerKind::kSgd, 8, 0.15, 2e-3, true});
}

}  // namespace
}  // namespace braid::trainer::cuda
