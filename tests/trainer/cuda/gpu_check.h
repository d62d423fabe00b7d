// What the GPU checks of the CUDA trainer share: the skip without a GPU, an exact (no TF32,
// NaN-poisoned outputs) context, random data, and elementwise comparison against the CPU layers.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "trainer/cuda/context.h"
#include "trainer/nn/tensor.h"

/// Skips the test (recorded) where no CUDA device is usable.
#define BRAID_REQUIRE_TRAINER_GPU()                                                \
  do {                                                                             \
    if (::braid::trainer::cuda::usableGpuCount() == 0) {                           \
      BRAID_SKIP_NO_DEVICE("no CUDA device (the CUDA trainer's checks need one)"); \
    }                                                                              \
  } while (0)

namespace braid::trainer::cuda::gputest {

/// The layer checks' context: float32 convolutions without TF32, outputs NaN until written.
inline ContextOptions exactOptions() {
  ContextOptions o;
  o.tf32Convolutions = false;
  o.poisonOutputs = true;
  return o;
}

inline std::vector<float> randomFloats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline Tensor randomTensor(const std::vector<int>& shape, uint64_t seed) {
  Tensor t(shape);
  t.data = randomFloats(t.numel(), seed);
  return t;
}

/// "" when every got[i] is within tol x max|want| of want[i] (NaN never is); else the first bad
/// element, the worst error and the scale, prefixed by `what`.
inline std::string compare(const std::string& what, const float* want, const float* got, size_t n,
                           double tol) {
  double scale = 0.0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  const double limit = tol * std::max(scale, 1e-6);
  double worst = 0.0;
  size_t worstAt = 0, bad = 0, firstBad = n;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(want[i]) - got[i]);
    if (!(d <= limit)) {
      if (firstBad == n) firstBad = i;
      ++bad;
    }
    if (!(d <= worst)) {
      worst = std::isnan(d) ? INFINITY : d;
      worstAt = i;
    }
  }
  if (bad == 0) return "";
  return what + ": " + std::to_string(bad) + " of " + std::to_string(n) +
         " elements off; first at " + std::to_string(firstBad) + " want " +
         std::to_string(want[firstBad]) + " got " + std::to_string(got[firstBad]) + "; worst at " +
         std::to_string(worstAt) + " |diff| " + std::to_string(worst) + " > limit " +
         std::to_string(limit) + " (tol " + std::to_string(tol) + " x max|want| " +
         std::to_string(scale) + ")";
}

/// Fails the test with what each rank threw (testing::runRanks' result).
inline void expectNoRankErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  }
}

/// fp16's check: "" when |got - want| <= tol x |want| (Euclidean norms, NaN never passes); else
/// both norms, prefixed by `what`.
inline std::string compareNorm(const std::string& what, const float* want, const float* got,
                               size_t n, double tol) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  diff = std::sqrt(diff);
  norm = std::sqrt(norm);
  if (diff <= tol * std::max(norm, 1e-12)) return "";
  return what + ": |got - want| " + std::to_string(diff) + " > " + std::to_string(tol) +
         " x |want| " + std::to_string(norm) + " (" + std::to_string(n) + " elements)";
}

inline std::string compare(const std::string& what, const std::vector<float>& want,
                           const std::vector<float>& got, double tol) {
  if (want.size() != got.size()) {
    return what + ": sizes " + std::to_string(want.size()) + " vs " + std::to_string(got.size());
  }
  return compare(what, want.data(), got.data(), want.size(), tol);
}

inline std::string compare(const std::string& what, const Tensor& want, const Tensor& got,
                           double tol) {
  if (want.shape != got.shape) {
    return what + ": shape " + shapeString(got.shape) + ", want " + shapeString(want.shape);
  }
  return compare(what, want.data, got.data, tol);
}

}  // namespace braid::trainer::cuda::gputest
