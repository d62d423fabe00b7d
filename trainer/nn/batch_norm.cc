#include "trainer/nn/batch_norm.h"

#include <fmt/format.h>

#include <cmath>

#include "common/error.h"

namespace braid::trainer {

namespace {

// Sums of f(i) over a plane with 8 independent float accumulators, so the compiler vectorises
// without -ffast-math; planes are summed in double by the callers.
template <typename F>
float planeSum(size_t n, F f) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += f(i + j);
  }
  float s = 0.0f;
  for (; i < n; ++i) s += f(i);
  for (float a : acc) s += a;
  return s;
}

}  // namespace

BatchNorm2d::BatchNorm2d(ParamStore& store, const std::string& name, int channels, float momentum,
                         float eps)
    : store_(store), c_(channels), momentum_(momentum), eps_(eps) {
  BRAID_ENFORCE(channels > 0 && momentum >= 0.0f && momentum <= 1.0f && eps > 0.0f,
                ErrorCode::kInvalidUsage, "BatchNorm2d '{}': channels {} momentum {} eps {}", name,
                channels, momentum, eps);
  paramBegin_ = store.numParams();
  gamma_ = store.addParam(name + ".weight", {channels}, Init::kOnes);
  beta_ = store.addParam(name + ".bias", {channels}, Init::kZeros);
  bufferBegin_ = store.numBuffers();
  runningMean_ = store.addBuffer(name + ".running_mean", {channels}, 0.0f);
  runningVar_ = store.addBuffer(name + ".running_var", {channels}, 1.0f);
}

const Tensor& BatchNorm2d::forward(const Tensor& x) {
  BRAID_ENFORCE(x.shape.size() >= 2 && x.dim(1) == c_, ErrorCode::kInvalidUsage,
                "BatchNorm2d({}): input shape {}", c_, shapeString(x.shape));
  const int n = x.dim(0);
  const size_t hw = x.perSample() / c_;
  const size_t m = n * hw;
  BRAID_ENFORCE(!training_ || m > 1, ErrorCode::kInvalidUsage,
                "BatchNorm2d({}): training needs more than one value per channel, input {}", c_,
                shapeString(x.shape));
  forwardWasTraining_ = training_;
  xhat_.resize(x.shape);
  y_.resize(x.shape);
  invStd_.resize(c_);
  const float* gamma = store_.value(gamma_);
  const float* beta = store_.value(beta_);
  float* rmean = store_.buffer(runningMean_);
  float* rvar = store_.buffer(runningVar_);
  for (int c = 0; c < c_; ++c) {
    double mean, var;
    if (training_) {
      double sum = 0.0, sq = 0.0;
      for (int s = 0; s < n; ++s) {
        const float* p = x.ptr() + (static_cast<size_t>(s) * c_ + c) * hw;
        sum += planeSum(hw, [p](size_t i) { return p[i]; });
      }
      mean = sum / m;
      for (int s = 0; s < n; ++s) {
        const float* p = x.ptr() + (static_cast<size_t>(s) * c_ + c) * hw;
        const float fm = static_cast<float>(mean);
        sq += planeSum(hw, [p, fm](size_t i) { return (p[i] - fm) * (p[i] - fm); });
      }
      var = sq / m;
      rmean[c] = static_cast<float>((1.0 - momentum_) * rmean[c] + momentum_ * mean);
      rvar[c] = static_cast<float>((1.0 - momentum_) * rvar[c] + momentum_ * var * m / (m - 1));
    } else {
      mean = rmean[c];
      var = rvar[c];
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps_));
    const float fmean = static_cast<float>(mean);
    invStd_[c] = inv;
    for (int s = 0; s < n; ++s) {
      const size_t off = (static_cast<size_t>(s) * c_ + c) * hw;
      const float* p = x.ptr() + off;
      float* xh = xhat_.ptr() + off;
      float* out = y_.ptr() + off;
      for (size_t i = 0; i < hw; ++i) {
        xh[i] = (p[i] - fmean) * inv;
        out[i] = gamma[c] * xh[i] + beta[c];
      }
    }
  }
  return y_;
}

const Tensor& BatchNorm2d::backward(const Tensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "BatchNorm2d({}): backward with dy {} after forward output {}", c_,
                shapeString(dy.shape), shapeString(y_.shape));
  const int n = dy.dim(0);
  const size_t hw = dy.perSample() / c_;
  const size_t m = n * hw;
  dx_.resize(dy.shape);
  const float* gamma = store_.value(gamma_);
  float* dgamma = store_.grad(gamma_);
  float* dbeta = store_.grad(beta_);
  for (int c = 0; c < c_; ++c) {
    double sumDy = 0.0, sumDyXhat = 0.0;
    for (int s = 0; s < n; ++s) {
      const size_t off = (static_cast<size_t>(s) * c_ + c) * hw;
      const float* g = dy.ptr() + off;
      const float* xh = xhat_.ptr() + off;
      sumDy += planeSum(hw, [g](size_t i) { return g[i]; });
      sumDyXhat += planeSum(hw, [g, xh](size_t i) { return g[i] * xh[i]; });
    }
    dgamma[c] += static_cast<float>(sumDyXhat);
    dbeta[c] += static_cast<float>(sumDy);
    const float scale = gamma[c] * invStd_[c];
    // Training: dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), since the batch
    // statistics depend on x. Eval: the statistics are constants, dx = gamma * invstd * dy.
    const float meanDy = forwardWasTraining_ ? static_cast<float>(sumDy / m) : 0.0f;
    const float meanDyXhat = forwardWasTraining_ ? static_cast<float>(sumDyXhat / m) : 0.0f;
    for (int s = 0; s < n; ++s) {
      const size_t off = (static_cast<size_t>(s) * c_ + c) * hw;
      const float* g = dy.ptr() + off;
      const float* xh = xhat_.ptr() + off;
      float* out = dx_.ptr() + off;
      for (size_t i = 0; i < hw; ++i) out[i] = scale * (g[i] - meanDy - xh[i] * meanDyXhat);
    }
  }
  return dx_;
}

std::string BatchNorm2d::describe() const { return fmt::format("BatchNorm2d({})", c_); }

}  // namespace braid::trainer
