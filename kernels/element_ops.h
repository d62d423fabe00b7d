// Per-element reduction operators and float16/bfloat16 scalar conversions, header-only so the CPU
// kernels and (later) CUDA kernels share one definition. Includes nothing of braid's.
//
// Semantics shared by every backend:
//  - Integer sum/prod wrap (two's complement): they are computed in the unsigned type, so there
//    is no signed-overflow UB.
//  - Float max/min propagate NaN: if either operand is NaN the result is NaN (the first operand's
//    NaN when both are). Between +0 and -0 they return the second operand.
//  - float16/bfloat16 are computed in float32 by the callers (these ops see float).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "braid/types.hpp"

#ifdef __CUDACC__
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

namespace braid::kernels {

namespace detail {

/// The type integer arithmetic is done in: unsigned, and at least `unsigned int` wide so small
/// types do not promote back to (signed) int before multiplying.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

BRAID_HOST_DEVICE inline uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

BRAID_HOST_DEVICE inline float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace detail

/// a + b; integers wrap.
struct SumOp {
  template <typename T>
  BRAID_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = detail::WrapType<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

/// a * b; integers wrap.
struct ProdOp {
  template <typename T>
  BRAID_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = detail::WrapType<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

/// x * scalar, the NCCL API's PreMulSum scaling (`scalar`: an element of x's type, as a double).
/// Floats: the product in double, rounded to T once (for float32 and float64 the same as
/// multiplying in T: a product of two floats is exact in double). Integers: T's wrapping product
/// (ProdOp) with the scalar converted to T, clamped to T's range (a 64-bit integer scalar beyond
/// 2^53 arrives rounded by its trip through double). The 16-bit floats: callers pass float.
template <typename T>
BRAID_HOST_DEVICE T scaleElem(T x, double scalar) {
  if constexpr (std::is_integral_v<T>) {
    constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
    const T k = scalar <= static_cast<double>(kMin)   ? kMin
                : scalar >= static_cast<double>(kMax) ? kMax
                                                      : static_cast<T>(scalar);
    return ProdOp()(x, k);
  } else {
    return static_cast<T>(static_cast<double>(x) * scalar);
  }
}

/// max(a, b); NaN-propagating for floats (see the file comment).
struct MaxOp {
  template <typename T>
  BRAID_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      // a != a is "a is NaN"; b NaN falls through to b because a > NaN is false.
      return (a > b || a != a) ? a : b;
    }
  }
};

/// min(a, b); NaN-propagating for floats (see the file comment).
struct MinOp {
  template <typename T>
  BRAID_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return (a < b || a != a) ? a : b;
    }
  }
};

/// a op b for a run-time op (kAvg folds as a sum), for references and scalar code; the kernels
/// dispatch once per call instead.
template <typename T>
BRAID_HOST_DEVICE T applyOp(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kProd:
      return ProdOp()(a, b);
    case RedOp::kMax:
      return MaxOp()(a, b);
    case RedOp::kMin:
      return MinOp()(a, b);
    case RedOp::kSum:
    case RedOp::kAvg:
      break;
  }
  return SumOp()(a, b);
}

/// IEEE binary16 bits -> float32 (exact). A signalling NaN comes back quiet (as x86 F16C does).
BRAID_HOST_DEVICE inline float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf or NaN
    return detail::bitsFloat(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  }
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float32
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return detail::bitsFloat(detail::floatBits(mag) | sign);
  }
  return detail::bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// float32 -> IEEE binary16 bits, round to nearest even; overflow gives inf; a NaN stays NaN
/// (quieted, payload truncated, as x86 F16C does).
BRAID_HOST_DEVICE inline uint16_t floatToHalfBits(float f) {
  uint32_t u = detail::floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  uint32_t r;
  if (u >= 0x7f800000u) {  // inf or NaN
    r = u > 0x7f800000u ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  } else if (u >= 0x477ff000u) {  // >= 65520 (halfway past the largest half 65504): inf
    r = 0x7c00u;
  } else if (u < 0x38800000u) {  // below 2^-14: subnormal or zero
    // Adding 0.5 makes the float32 ulp 2^-24, the half subnormal ulp, so the FPU rounds for us.
    r = detail::floatBits(detail::bitsFloat(u) + 0.5f) - 0x3f000000u;
  } else {
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    r = (u - 0x38000000u + 0xfffu + ((u >> 13) & 1u)) >> 13;
  }
  return static_cast<uint16_t>(r | sign);
}

/// bfloat16 bits -> float32 (exact).
BRAID_HOST_DEVICE inline float bfloat16BitsToFloat(uint16_t b) {
  return detail::bitsFloat(static_cast<uint32_t>(b) << 16);
}

/// float32 -> bfloat16 bits, round to nearest even; a NaN stays NaN (quieted).
BRAID_HOST_DEVICE inline uint16_t floatToBfloat16Bits(float f) {
  const uint32_t u = detail::floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace braid::kernels
