// Seed-free, exactly representable test data and the expected result of every dtype x op:
// small integers, so sums over 16 ranks are exact in every type (int8 and half included).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::testing {

inline bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 ||
         t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}
inline bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}

/// Input element i of rank r for op `op`.
inline double inputValue(DataType t, RedOp op, int r, size_t i) {
  if (op == RedOp::kProd) {
    // Mostly 1 and -1, a 2 only on ranks 0..3: products stay within every type.
    if (r < 4 && (i + r) % 5 == 0) return 2;
    return (isSigned(t) && (i * 3 + r) % 7 == 0) ? -1 : 1;
  }
  double v = static_cast<double>((i * 7 + r * 13 + 1) % 7);
  return isSigned(t) ? v - 3 : v;
}

/// Stores `v` as element i of a buffer of type t.
inline void store(DataType t, void* buf, size_t i, double v) {
  kernels::storeElement(t, buf, i, v);
}

/// Fills a buffer with rank r's input.
inline void fillInput(DataType t, RedOp op, int r, void* buf, size_t count, size_t first = 0) {
  for (size_t i = 0; i < count; ++i) store(t, buf, i, inputValue(t, op, r, first + i));
}

/// Writes the expected reduction of element i over ranks 0..n-1 into `buf` at index j.
inline void storeExpected(DataType t, RedOp op, int n, size_t i, void* buf, size_t j) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    acc = kernels::applyOp(op, acc, inputValue(t, op, r, i));
  }
  if (op == RedOp::kAvg) {
    if (!isFloat(t)) {
      acc = std::trunc(acc / n);  // integer division truncates toward zero
    } else if (t == DataType::kFloat64) {
      acc = acc / n;
    } else {
      acc = double(float(acc) / float(n));  // float32 division, then rounded to the type
    }
  }
  store(t, buf, j, acc);
}

/// Byte-exact comparison; returns the index of the first differing element or -1.
inline long firstMismatch(const void* a, const void* b, size_t count, size_t elem) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  if (std::memcmp(x, y, count * elem) == 0) return -1;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(x + i * elem, y + i * elem, elem) != 0) return long(i);
  return -1;
}

}  // namespace braid::testing
