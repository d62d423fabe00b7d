// --precision fp16 pieces: the loss scaler's rule, the checkpoint's loss-scale section, and the
// float16 gradient all-reduce against float32 on 2 thread-ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/kit/communicators.h"
#include "trainer/train/checkpoint.h"
#include "trainer/train/grad_sync.h"
#include "trainer/train/loss_scaler.h"

namespace braid::trainer {
namespace {

TEST(LossScaler, HalvesOnOverflowAndDoublesAfterTheGrowthInterval) {
  LossScalerOptions o;
  o.growthInterval = 3;
  LossScaler s(o);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skippedSteps(), 1);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.goodSteps(), 2);
  s.update(true);  // an overflow restarts the count
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 16384.0f);
  s.update(false);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.goodSteps(), 0);
  EXPECT_EQ(s.skippedSteps(), 2);
  EXPECT_EQ(LossScalerOptions{}.growthInterval, 2000);
}

TEST(LossScaler, FixedScaleNeverChanges) {
  LossScalerOptions o;
  o.fixedScale = 1e30f;
  o.growthInterval = 1;
  LossScaler s(o);
  s.update(true);
  s.update(false);
  s.restore(4.0f, 0, 7);
  EXPECT_EQ(s.scale(), 1e30f);
  EXPECT_EQ(s.skippedSteps(), 7);
  EXPECT_THROW(s.restore(NAN, 0, 0), Error);
}

CheckpointState smallState() {
  CheckpointState s;
  s.fingerprint.model = "mlp";
  s.fingerprint.optimizer = "adam";
  s.step = 12;
  s.params = {1, 2, 3};
  s.optimizer = {'x', 'y'};
  return s;
}

TEST(Fp16Checkpoint, LossScaleSectionRoundTripsAndIsOptional) {
  CheckpointState s = smallState();
  const std::vector<char> plain = encodeCheckpoint(s);
  EXPECT_FALSE(decodeCheckpoint(plain, "plain").lossScale.has_value());
  s.lossScale = CheckpointLossScale{8192.0f, 1999, 5};
  const std::vector<char> withScale = encodeCheckpoint(s);
  EXPECT_EQ(withScale.size(), plain.size() + 4 + 4 + 8 + 8);
  const CheckpointState back = decodeCheckpoint(withScale, "fp16");
  ASSERT_TRUE(back.lossScale.has_value());
  EXPECT_EQ(back.lossScale->scale, 8192.0f);
  EXPECT_EQ(back.lossScale->goodSteps, 1999);
  EXPECT_EQ(back.lossScale->skippedSteps, 5);
  EXPECT_EQ(back.params, s.params);
  // Truncating the section away is caught (length / checksum).
  std::vector<char> cut(withScale.begin(), withScale.end() - 12);
  EXPECT_THROW(decodeCheckpoint(cut, "cut"), Error);
}

// Each rank's "scaled" gradients g_r = scale * u_r with u_r uniform in [-1, 1]. The fp16 path
// converts g_r to half, averages as half and divides by the scale; compared with the float32
// average (u_0 + u_1) / 2. Each of the two input roundings and the output rounding is at most
// half an ulp of a value <= 1 in binary16 (2^-11), so |difference| <= 3 * 2^-11 ~ 1.5e-3 (the
// average of the kernel may round once more: tolerance 2e-3). The optimizer is SGD with lr 1
// and no momentum from zero parameters, so the parameters after the step are -average.
// With `overflowOnRank1` one element of rank 1 is 1e6 * scale (inf in half): both ranks skip.
struct TwoRankResult {
  std::vector<float> params[2];
  std::vector<float> reference;
  bool skipped[2] = {false, false};
  float scaleAfter[2] = {0, 0};
  std::string errors[2];
};

TwoRankResult runTwoRanks(bool overflowOnRank1) {
  constexpr size_t kN = 3000;
  constexpr float kScale = 1024.0f;
  std::vector<float> u[2];
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : u) {
    v.resize(kN);
    for (float& x : v) x = dist(rng);
  }
  TwoRankResult out;
  out.reference.resize(kN);
  for (size_t i = 0; i < kN; ++i) out.reference[i] = (u[0][i] + u[1][i]) / 2;
  Options options;
  options.timeoutSeconds = 20;
  const auto errors = testing::errorTexts(testing::runRanks(2, options, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> grads(kN), params(kN, 0.0f);
    for (size_t i = 0; i < kN; ++i) grads[i] = u[r][i] * kScale;
    if (overflowOnRank1 && r == 1) grads[1234] = 1e6f * kScale;
    OptimizerOptions oo;
    oo.kind = OptimizerKind::kSgd;
    oo.lr = 1.0f;
    oo.momentum = 0.0f;
    Optimizer opt(oo, kN);
    // Parameters of 1000 elements each, buckets of 700: 5 buckets, some cut.
    GradSync sync(comm, grads.data(), {0, 1000, 2000}, kN, 700);
    sync.setHalfPrecision(true);
    LossScalerOptions so;
    so.initScale = kScale;
    LossScaler scaler(so);
    sync.arm();
    sync.onGradReady(2000);
    sync.finishBackward();
    const auto step = sync.stepAndWaitScaled(opt, params.data(), scaler);
    out.skipped[r] = step.skipped;
    out.scaleAfter[r] = scaler.scale();
    out.params[r] = params;
  }));
  for (int r = 0; r < 2; ++r) out.errors[r] = errors[r];
  return out;
}

TEST(Fp16GradSync, HalfAllReduceMatchesFloat32WithinTolerance) {
  const TwoRankResult res = runTwoRanks(false);
  constexpr float kTolerance = 2e-3f;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res.errors[r], "") << "rank " << r;
    EXPECT_FALSE(res.skipped[r]);
    EXPECT_EQ(res.scaleAfter[r], 1024.0f);
    ASSERT_EQ(res.params[r].size(), res.reference.size());
    float worst = 0;
    for (size_t i = 0; i < res.reference.size(); ++i) {
      const float d = std::fabs(-res.params[r][i] - res.reference[i]);
      ASSERT_LE(d, kTolerance) << "rank " << r << " element " << i;
      worst = std::max(worst, d);
    }
    EXPECT_GT(worst, 0.0f);  // it really went through float16
    if (r == 0) std::printf("max |fp16 - fp32 average| = %g\n", worst);
  }
  EXPECT_EQ(res.params[0], res.params[1]);
}

TEST(Fp16GradSync, OverflowOnOneRankSkipsOnBothAndHalvesTheScale) {
  const TwoRankResult res = runTwoRanks(true);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res.errors[r], "") << "rank " << r;
    EXPECT_TRUE(res.skipped[r]) << "rank " << r;
    EXPECT_EQ(res.scaleAfter[r], 512.0f);
    for (float p : res.params[r]) ASSERT_EQ(p, 0.0f) << "rank " << r << " stepped";
  }
}

}  // namespace
}  // namespace braid::trainer
