// Central finite-difference gradient checks for trainer layers, accumulated in float64.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/nn/layer.h"
#include "trainer/nn/param_store.h"
#include "trainer/nn/rng.h"
#include "trainer/nn/tensor.h"

namespace braid::trainer::testing {

/// A tensor of the given shape filled with U(lo, hi) from `seed`.
Tensor randomTensor(std::vector<int> shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

struct GradCheckOptions {
  double h = 1e-2;  ///< perturbation of each input / parameter element
  /// Skip components where the central differences with h and h/4 differ by more than kinkTol
  /// relative (+2e-3 absolute, the float32 noise of the h/4 difference): a ReLU or max crossed
  /// its kink inside [x-h, x+h], where a central difference is meaningless. Callers bound the
  /// share of skipped components.
  bool kinkAware = false;
  double kinkTol = 2e-3;
};

struct GradCheckResult {
  double inputRelErr = 0.0;  ///< ||numeric - analytic|| / max(||numeric||, ||analytic||)
  double paramRelErr = 0.0;  ///< same over all parameters of the store (0 when none)
  size_t checked = 0;
  size_t skipped = 0;
};

/// Checks layer.backward() against central differences of L = sum_i r_i * y_i (r random, fixed,
/// summed in double) with respect to every element of x and of the store's parameters.
GradCheckResult gradCheck(Layer& layer, ParamStore& store, Tensor x, uint64_t seed,
                          const GradCheckOptions& options = {});

/// Norm-wise relative error of two vectors.
double relativeError(const std::vector<double>& numeric, const std::vector<double>& analytic);

}  // namespace braid::trainer::testing
