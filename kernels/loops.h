// Element loops the CPU kernels instantiate per (element kind, op): simple indexed loops over
// byte-aligned element types with __restrict, which GCC/Clang auto-vectorise (bfloat16's
// conversions are integer ops, so its loops vectorise too). Internal to kernels/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/element_ops.h"

namespace braid::kernels::detail {

template <typename T>
struct Unaligned {
  // Alignment 1 makes any byte address a valid T location, so callers' unaligned buffers are
  // not UB and the vectoriser never assumes (or peels for) element alignment.
  typedef T type __attribute__((aligned(1), may_alias));
};

/// T as stored in a user buffer: any alignment.
template <typename T>
using UA = typename Unaligned<T>::type;

/// How a buffer element is stored and computed: Plain<T> computes in T itself; the 16-bit float
/// types compute in float32 and round back to nearest even.
template <typename T>
struct Plain {
  using Storage = T;
  using Compute = T;
  static T in(T x) { return x; }
  static T out(T x) { return x; }
};

struct HalfElem {
  using Storage = uint16_t;
  using Compute = float;
  static float in(uint16_t h) { return halfBitsToFloat(h); }
  static uint16_t out(float f) { return floatToHalfBits(f); }
};

struct BFloat16Elem {
  using Storage = uint16_t;
  using Compute = float;
  static float in(uint16_t b) { return bfloat16BitsToFloat(b); }
  static uint16_t out(float f) { return floatToBfloat16Bits(f); }
};

/// d[i] = op(a[i], b[i]); d, a and b do not overlap.
template <typename E, typename Op, typename S = typename E::Storage>
inline void binaryLoop(UA<S>* __restrict d, const UA<S>* __restrict a, const UA<S>* __restrict b,
                       size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = E::out(op(E::in(a[i]), E::in(b[i])));
}

/// d[i] = op(d[i], b[i]); d and b do not overlap.
template <typename E, typename Op, typename S = typename E::Storage>
inline void accumulateLoop(UA<S>* __restrict d, const UA<S>* __restrict b, size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = E::out(op(E::in(d[i]), E::in(b[i])));
}

/// d[i] = op(op(d[i], b[i]), c[i]) (two accumulation steps, in that order, in one pass); d does
/// not overlap b or c.
template <typename E, typename Op, typename S = typename E::Storage>
inline void accumulate2Loop(UA<S>* __restrict d, const UA<S>* __restrict b,
                            const UA<S>* __restrict c, size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = E::out(op(op(E::in(d[i]), E::in(b[i])), E::in(c[i])));
}

/// d[i] = op(a[i], d[i]); d and a do not overlap.
template <typename E, typename Op, typename S = typename E::Storage>
inline void accumulateRightLoop(UA<S>* __restrict d, const UA<S>* __restrict a, size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = E::out(op(E::in(a[i]), E::in(d[i])));
}

/// d[i] = op(d[i], d[i]) (dst == a == b).
template <typename E, typename Op, typename S = typename E::Storage>
inline void selfLoop(UA<S>* __restrict d, size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = E::out(op(E::in(d[i]), E::in(d[i])));
}

/// acc[i] = op(acc[i], in(s[i])): accumulate stored elements into a compute-type buffer.
template <typename E, typename Op, typename S = typename E::Storage,
          typename C = typename E::Compute>
inline void accumulateFromLoop(C* __restrict acc, const UA<S>* __restrict s, size_t n) {
  const Op op;
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) acc[i] = op(acc[i], E::in(s[i]));
}

/// dst = a op b for n elements, choosing the loop for the exact aliasing the contract allows
/// (dst == a, dst == b, or both) so __restrict stays truthful.
template <typename E, typename Op>
inline void reduceAliased(void* dst, const void* a, const void* b, size_t n) {
  using S = typename E::Storage;
  auto* d = static_cast<UA<S>*>(dst);
  if (dst == a) {
    if (dst == b) {
      selfLoop<E, Op>(d, n);
    } else {
      accumulateLoop<E, Op>(d, static_cast<const UA<S>*>(b), n);
    }
  } else if (dst == b) {
    accumulateRightLoop<E, Op>(d, static_cast<const UA<S>*>(a), n);
  } else {
    binaryLoop<E, Op>(d, static_cast<const UA<S>*>(a), static_cast<const UA<S>*>(b), n);
  }
}

}  // namespace braid::kernels::detail
