// SGD, Adam and AdamW step values against hand-computed references; schedules; state round trip.
#include "trainer/nn/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

namespace braid::trainer {
namespace {

// Runs `steps` steps on one parameter p0 with constant gradient g; returns p after each step.
std::vector<float> run(const OptimizerOptions& options, float p0, float g, int steps) {
  Optimizer opt(options, 1);
  float p = p0;
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) {
    opt.step(&p, &g);
    out.push_back(p);
  }
  return out;
}

TEST(OptimizerTest, SgdMomentumWeightDecayByHand) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weightDecay = 0.01f;
  // g' = g + wd p; b1 = g'; b_t = 0.9 b + g'; p -= lr b. With p0 = 1, g = 0.5:
  //   step 1: g' = 0.51,       b = 0.51,        p = 0.949
  //   step 2: g' = 0.50949,    b = 0.96849,     p = 0.852151
  //   step 3: g' = 0.50852151, b = 1.38016251,  p = 0.714134749
  auto p = run(o, 1.0f, 0.5f, 3);
  EXPECT_NEAR(p[0], 0.949, 1e-6);
  EXPECT_NEAR(p[1], 0.852151, 1e-6);
  EXPECT_NEAR(p[2], 0.714134749, 1e-6);
}

TEST(OptimizerTest, SgdPlain) {
  OptimizerOptions o;
  o.lr = 0.5f;
  o.momentum = 0.0f;
  auto p = run(o, 2.0f, 1.0f, 3);
  EXPECT_FLOAT_EQ(p[0], 1.5f);
  EXPECT_FLOAT_EQ(p[1], 1.0f);
  EXPECT_FLOAT_EQ(p[2], 0.5f);
}

TEST(OptimizerTest, AdamConstantGradientMovesByLr) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.1f;
  // With a constant gradient the bias-corrected m/sqrt(v) is exactly sign(g) = 1 each step
  // (up to eps = 1e-8), so p_t = 1 - 0.1 t.
  auto p = run(o, 1.0f, 0.5f, 4);
  EXPECT_NEAR(p[0], 0.9, 1e-6);
  EXPECT_NEAR(p[1], 0.8, 1e-6);
  EXPECT_NEAR(p[2], 0.7, 1e-6);
  EXPECT_NEAR(p[3], 0.6, 1e-6);
}

TEST(OptimizerTest, AdamVaryingGradientByHand) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01f;
  o.weightDecay = 0.1f;
  // Double-precision reference of PyTorch's Adam (L2 weight decay added to the gradient).
  const double grads[3] = {0.3, -0.2, 0.05};
  Optimizer opt(o, 1);
  float p = 0.5f;
  double rp = 0.5, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    float g = static_cast<float>(grads[t - 1]);
    opt.step(&p, &g);
    const double gg = grads[t - 1] + 0.1 * rp;
    m = 0.9 * m + 0.1 * gg;
    v = 0.999 * v + 0.001 * gg * gg;
    const double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.999, t));
    rp -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    EXPECT_NEAR(p, rp, 1e-6) << "step " << t;
  }
  // Step 1 by hand: g' = 0.3 + 0.05 = 0.35, mhat = 0.35, vhat = 0.1225, p = 0.5 - 0.01 = 0.49.
  EXPECT_EQ(opt.stepCount(), 3);
}

TEST(OptimizerTest, AdamWDecoupledDecayByHand) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.lr = 0.1f;
  o.weightDecay = 0.1f;
  // p *= 1 - lr wd = 0.99, then Adam's step of exactly lr for a constant gradient:
  //   0.99 - 0.1 = 0.89;  0.89 * 0.99 - 0.1 = 0.7811;  0.7811 * 0.99 - 0.1 = 0.673289
  auto p = run(o, 1.0f, 0.5f, 3);
  EXPECT_NEAR(p[0], 0.89, 1e-6);
  EXPECT_NEAR(p[1], 0.7811, 1e-6);
  EXPECT_NEAR(p[2], 0.673289, 1e-6);
}

TEST(OptimizerTest, WarmupAndLinearScaling) {
  OptimizerOptions o;
  o.lr = 0.1f;
  o.momentum = 0.0f;
  o.warmupSteps = 4;
  o.linearScaling = true;
  o.globalBatch = 512;  // x2
  Optimizer opt(o, 1);
  const float expected[6] = {0.05f, 0.1f, 0.15f, 0.2f, 0.2f, 0.2f};
  float p = 0.0f, g = 1.0f, sum = 0.0f;
  for (float lr : expected) {
    EXPECT_FLOAT_EQ(opt.learningRate(), lr);
    opt.step(&p, &g);
    sum += lr;
    EXPECT_NEAR(p, -sum, 1e-6);
  }
}

TEST(OptimizerTest, StepInSlicesEqualsWholeStep) {
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerOptions o;
    o.kind = kind;
    o.lr = 0.05f;
    o.weightDecay = 0.01f;
    const size_t n = 10;
    std::vector<float> a(n), b(n), g(n);
    for (size_t i = 0; i < n; ++i) a[i] = b[i] = 0.1f * i - 0.3f, g[i] = 0.2f - 0.07f * i;
    Optimizer whole(o, n), sliced(o, n);
    for (int s = 0; s < 3; ++s) {
      whole.step(a.data(), g.data());
      sliced.stepRange(b.data(), g.data(), 6, 10);  // buckets arrive from the end
      sliced.stepRange(b.data(), g.data(), 0, 6);
      sliced.finishStep();
    }
    EXPECT_EQ(a, b) << optimizerKindName(kind);
  }
}

TEST(OptimizerTest, StateRoundTripContinuesIdentically) {
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerOptions o;
    o.kind = kind;
    o.lr = 0.05f;
    const size_t n = 5;
    std::vector<float> p(n, 1.0f), g = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f};
    Optimizer a(o, n);
    a.step(p.data(), g.data());
    a.step(p.data(), g.data());
    std::vector<char> state = a.saveState();
    std::vector<float> q = p;
    Optimizer b(o, n);
    b.loadState(state.data(), state.size());
    EXPECT_EQ(b.stepCount(), 2);
    a.step(p.data(), g.data());
    b.step(q.data(), g.data());
    EXPECT_EQ(p, q) << optimizerKindName(kind);

    EXPECT_THROW(b.loadState(state.data(), state.size() - 1), Error);  // truncated
    Optimizer other(o, n + 1);
    EXPECT_THROW(other.loadState(state.data(), state.size()), Error);  // other size
    OptimizerOptions o2 = o;
    o2.kind = kind == OptimizerKind::kSgd ? OptimizerKind::kAdam : OptimizerKind::kSgd;
    Optimizer otherKind(o2, n);
    EXPECT_THROW(otherKind.loadState(state.data(), state.size()), Error);  // other kind
  }
}

TEST(OptimizerTest, ParseNames) {
  EXPECT_EQ(parseOptimizerKind("adamw"), OptimizerKind::kAdamW);
  EXPECT_THROW(parseOptimizerKind("lamb"), Error);
}

}  // namespace
}  // namespace braid::trainer

namespace braid::trainer {
namespace {

// Warm-up, then half a cosine from the base rate to 0 at decaySteps, and 0 after.
TEST(OptimizerTest, CosineDecayAfterWarmup) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.4f;
  o.warmupSteps = 2;
  o.decaySteps = 12;
  Optimizer opt(o, 1);
  float p = 0, g = 0;
  std::vector<float> rates;
  for (int t = 0; t < 14; ++t) {
    rates.push_back(opt.learningRate());
    opt.step(&p, &g);
  }
  EXPECT_FLOAT_EQ(rates[0], 0.2f);  // warm-up: 0.4 * 1/2
  EXPECT_FLOAT_EQ(rates[1], 0.4f);
  EXPECT_FLOAT_EQ(rates[2], 0.4f);    // decay starts at the base rate
  EXPECT_NEAR(rates[7], 0.2f, 1e-6);  // half way: (1 + cos(pi/2)) / 2
  EXPECT_NEAR(rates[12], 0.0f, 1e-7);
  EXPECT_NEAR(rates[13], 0.0f, 1e-7);
  for (int t = 3; t < 13; ++t) EXPECT_LT(rates[t], rates[t - 1]) << "step " << t;
}

}  // namespace
}  // namespace braid::trainer
