// Data-parallel gradient sync on one GPU with 2 ranks as threads (each its own context and
// stream, one DeviceCommunicator per rank): after each step every rank's gradients are the
// average of both ranks' CPU gradients and its parameters the CPU's SGD step on that average.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "tests/kit/communicators.h"
#include "tests/trainer/cuda/gpu_check.h"
#include "trainer/cuda/device_grad_sync.h"
#include "trainer/cuda/device_loss.h"
#include "trainer/cuda/device_model.h"
#include "trainer/cuda/device_optimizer.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"

namespace braid::trainer::cuda {
namespace {

using gputest::compare;

constexpr int kRanks = 2;
constexpr int kSteps = 2;
constexpr int kBatch = 16;  // per rank

Tensor batchOf(int rank, int step) {
  return gputest::randomTensor({kBatch, 784}, 100 + 10 * step + rank);
}

std::vector<int32_t> labelsOf(int rank, int step) {
  std::vector<int32_t> l(kBatch);
  for (int i = 0; i < kBatch; ++i) l[i] = (i + 3 * rank + step) % 10;
  return l;
}

OptimizerOptions sgd() {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  return o;
}

TEST(DeviceGradSync, TwoRanksOnOneGpuAverageAndStepAlike) {
  BRAID_REQUIRE_TRAINER_GPU();
  // [rank][step]: the device gradients and parameters after the step.
  std::array<std::array<std::vector<float>, kSteps>, kRanks> grads, params;
  Options options;
  options.timeoutSeconds = 60;
  auto errors = testing::runRanks(kRanks, options, [&](Communicator& host) {
    const int r = host.rank();
    auto cpu = makeMlp(7);
    CudaContext ctx(gputest::exactOptions());
    DeviceCommunicator dc = DeviceCommunicator::create(host, 0);
    DeviceModel dev(*cpu, ctx);
    const size_t n = cpu->store.numParams();
    std::vector<size_t> offsets;
    for (const ParamView& v : cpu->store.paramViews()) offsets.push_back(v.offset);
    DeviceGradSync sync(&dc, ctx, dev.grads(), offsets, n, 30000);  // 11 buckets
    EXPECT_EQ(sync.buckets().size(), 11u);
    dev.setGradReadyHook([&sync](size_t from) { sync.onGradReady(from); });
    DeviceOptimizer opt(sgd(), n, ctx);
    DeviceSoftmaxCrossEntropy ce(ctx);
    DeviceTensor x;
    // A pass without the sync first, so every lazy allocation (activations, pinned staging,
    // cuBLAS's workspace) is done before a collective is pending: with ranks as threads of one
    // process an allocation that synchronises the device would wait for the peer's all-reduce.
    upload(batchOf(r, 0), x, ctx);
    ce.forward(dev.forward(x), labelsOf(r, 0));
    dev.backward(ce.backward());
    ce.result();
    host.barrier();
    for (int s = 0; s < kSteps; ++s) {
      dev.zeroGrads();
      upload(batchOf(r, s), x, ctx);
      sync.arm();
      ce.forward(dev.forward(x), labelsOf(r, s));
      dev.backward(ce.backward());
      sync.step(opt, dev.params());
      ce.result();
      grads[r][s].resize(n);
      params[r][s].resize(n);
      copyToHost(grads[r][s].data(), dev.grads(), n, ctx.stream());
      copyToHost(params[r][s].data(), dev.params(), n, ctx.stream());
      ctx.synchronize();
    }
    dc.synchronize();
  });
  gputest::expectNoRankErrors(errors);
  if (::testing::Test::HasFailure()) return;

  // The CPU: both ranks' gradients from the same parameters, averaged, one SGD step.
  auto cpu = makeMlp(7);
  const size_t n = cpu->store.numParams();
  Optimizer opt(sgd(), n);
  SoftmaxCrossEntropy ce;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> avg(n, 0.0f);
    for (int r = 0; r < kRanks; ++r) {
      cpu->store.zeroGrads();
      const Tensor x = batchOf(r, s);
      ce.forward(cpu->net.forward(x), labelsOf(r, s));
      cpu->net.backward(ce.backward());
      for (size_t i = 0; i < n; ++i) avg[i] += cpu->store.grads()[i] / kRanks;
    }
    opt.step(cpu->store.params(), avg.data());
    for (int r = 0; r < kRanks; ++r) {
      const std::string at = "rank " + std::to_string(r) + " step " + std::to_string(s);
      EXPECT_EQ(compare(at + " gradients", avg, grads[r][s], 1e-4), "");
      EXPECT_EQ(compare(at + " parameters",
                        std::vector<float>(cpu->store.params(), cpu->store.params() + n),
                        params[r][s], 1e-4),
                "");
    }
  }
}

}  // namespace
}  // namespace braid::trainer::cuda
