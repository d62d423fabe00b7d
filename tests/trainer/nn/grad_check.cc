#include "grad_check.h"

#include <algorithm>
#include <cmath>

namespace braid::trainer::testing {

Tensor randomTensor(std::vector<int> shape, uint64_t seed, float lo, float hi) {
  Tensor t(std::move(shape));
  SplitMix64 rng(seed);
  for (float& v : t.data) v = rng.uniform(lo, hi);
  return t;
}

double relativeError(const std::vector<double>& numeric, const std::vector<double>& analytic) {
  double diff = 0.0, nn = 0.0, na = 0.0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    diff += (numeric[i] - analytic[i]) * (numeric[i] - analytic[i]);
    nn += numeric[i] * numeric[i];
    na += analytic[i] * analytic[i];
  }
  const double denom = std::max({std::sqrt(nn), std::sqrt(na), 1e-12});
  return std::sqrt(diff) / denom;
}

namespace {

double lossOf(Layer& layer, const Tensor& x, const Tensor& r) {
  const Tensor& y = layer.forward(x);
  double sum = 0.0;
  for (size_t i = 0; i < y.numel(); ++i) sum += static_cast<double>(r.data[i]) * y.data[i];
  return sum;
}

double centralDifference(Layer& layer, const Tensor& x, const Tensor& r, float* value, double h) {
  const float saved = *value;
  *value = saved + static_cast<float>(h);
  const double plus = lossOf(layer, x, r);
  *value = saved - static_cast<float>(h);
  const double minus = lossOf(layer, x, r);
  *value = saved;
  // The float32 perturbation actually applied, not the requested one.
  const double step = (static_cast<double>(saved + static_cast<float>(h)) -
                       static_cast<double>(saved - static_cast<float>(h)));
  return (plus - minus) / step;
}

// Central difference of L with respect to *value; returns false when a kink was crossed.
bool numericDerivative(Layer& layer, const Tensor& x, const Tensor& r, float* value,
                       const GradCheckOptions& options, double& out) {
  out = centralDifference(layer, x, r, value, options.h);
  if (!options.kinkAware) return true;
  const double fine = centralDifference(layer, x, r, value, options.h / 4);
  return std::abs(out - fine) <= options.kinkTol * std::max(std::abs(out), std::abs(fine)) + 2e-3;
}

}  // namespace

GradCheckResult gradCheck(Layer& layer, ParamStore& store, Tensor x, uint64_t seed,
                          const GradCheckOptions& options) {
  GradCheckResult result;
  const Tensor& y0 = layer.forward(x);
  Tensor r = randomTensor(y0.shape, seed ^ 0x5eed);
  store.zeroGrads();
  layer.forward(x);
  const Tensor dx = layer.backward(r);
  std::vector<double> analyticGrads(store.grads(), store.grads() + store.numParams());

  std::vector<double> num, ana;
  for (size_t i = 0; i < x.numel(); ++i) {
    double d;
    if (numericDerivative(layer, x, r, &x.data[i], options, d)) {
      num.push_back(d);
      ana.push_back(dx.data[i]);
      ++result.checked;
    } else {
      ++result.skipped;
    }
  }
  result.inputRelErr = relativeError(num, ana);
  num.clear();
  ana.clear();
  for (size_t j = 0; j < store.numParams(); ++j) {
    double d;
    if (numericDerivative(layer, x, r, store.params() + j, options, d)) {
      num.push_back(d);
      ana.push_back(analyticGrads[j]);
      ++result.checked;
    } else {
      ++result.skipped;
    }
  }
  result.paramRelErr = num.empty() ? 0.0 : relativeError(num, ana);
  return result;
}

}  // namespace braid::trainer::testing
