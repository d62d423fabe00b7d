// Helpers for tests/cuda: seeded inputs (with NaN, infinities and signed zeros for the float
// types) and bytewise comparison; every dtype and op and the exact collective inputs are the
// test kit's (tests/kit/reference.h).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "braid/types.hpp"
#include "kernels/element_ops.h"
#include "kernels/kernels.h"
#include "tests/kit/reference.h"

namespace braid::cudatest {

using testing::isFloat;
using testing::kAllOps;
using testing::kAllTypes;

/// Sets element i of a `type` buffer from a double (rounded as the type's own conversion).
inline void setElem(void* buf, size_t i, DataType type, double v) {
  kernels::storeElement(type, buf, i, v);
}

/// `count` seeded elements: random bytes for integers (wrap-around exercised); for floats mostly
/// values in [-100, 100] with some NaN, +-inf, +-0 and tiny (subnormal-range) values.
inline std::vector<char> randomBuffer(size_t count, DataType type, uint32_t seed) {
  std::vector<char> b(count * dataTypeSize(type));
  std::mt19937 rng(seed);
  if (!isFloat(type)) {
    for (char& c : b) c = static_cast<char>(rng());
    return b;
  }
  std::uniform_real_distribution<double> val(-100, 100);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t pick = rng() % 64;
    double v = val(rng);
    if (pick == 0) v = NAN;
    if (pick == 1) v = INFINITY;
    if (pick == 2) v = -INFINITY;
    if (pick == 3) v = 0.0;
    if (pick == 4) v = -0.0;
    if (pick == 5) v = 1e-6 * val(rng);
    setElem(b.data(), i, type, v);
  }
  return b;
}

/// Whether element bytes `p` of `type` hold a NaN.
inline bool isNan(const void* p, DataType type) {
  uint16_t h;
  switch (type) {
    case DataType::kFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    case DataType::kBFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    default:
      return false;
  }
}

/// Bytewise equality with the first difference named. Any NaN equals any NaN: the sign and
/// payload of a NaN that arithmetic makes (inf - inf, 0 * inf, NaN op NaN) are unspecified
/// (compilers swap the operands of commutative ops; GPUs return a canonical NaN).
inline ::testing::AssertionResult sameBytes(const void* got, const void* want, size_t count,
                                            DataType type) {
  const size_t e = dataTypeSize(type);
  for (size_t i = 0; i < count; ++i) {
    const char* g = static_cast<const char*>(got) + i * e;
    const char* w = static_cast<const char*>(want) + i * e;
    if (std::memcmp(g, w, e) != 0 && !(isNan(g, type) && isNan(w, type))) {
      return ::testing::AssertionFailure()
             << dataTypeName(type) << " element " << i << " of " << count << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace braid::cudatest
