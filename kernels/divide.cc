// divide(): the finalize step of kAvg. Floats divide in their own precision (half types staged
// through float32); integers truncate toward zero, computed in 64 bits so no divisor overflows.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/loops.h"

namespace braid::kernels {
namespace {

using detail::UA;

/// d[i] = s[i] / q for a float type, q already converted to it.
template <typename F>
void divideFloat(UA<F>* d, const UA<F>* s, size_t n, F q) {
  if (static_cast<const void*>(d) == static_cast<const void*>(s)) {
    UA<F>* __restrict p = d;
#pragma GCC ivdep
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<F>(p[i]) / q;
  } else {
    UA<F>* __restrict out = d;
    const UA<F>* __restrict in = s;
#pragma GCC ivdep
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<F>(in[i]) / q;
  }
}

/// Signed x / divisor truncated toward zero, for any 64-bit unsigned divisor >= 1.
template <typename T>
T divideSigned(T x, uint64_t divisor) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (divisor > kMax) {
    // |x| < divisor except INT64_MIN / 2^63, which is exactly -1.
    return (static_cast<int64_t>(x) == std::numeric_limits<int64_t>::min() && divisor == kMax + 1)
               ? T(-1)
               : T(0);
  }
  return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
}

template <typename T>
void divideInt(UA<T>* d, const UA<T>* s, size_t n, uint64_t divisor) {
  // Element by element with one pointer pair: exact aliasing (d == s) reads before it writes.
  if constexpr (std::is_signed_v<T>) {
    if (divisor <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      // Common case: the divisor fits T, so T-width division is exact and faster.
      const T q = static_cast<T>(divisor);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<T>(s[i]) / q);
    } else {
      for (size_t i = 0; i < n; ++i) d[i] = divideSigned<T>(s[i], divisor);
    }
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<uint64_t>(s[i]) / divisor);
  }
}

template <typename T, typename Op>
struct DivideKernel {
  static void run(void* dst, const void* src, size_t n, uint64_t divisor) {
    if constexpr (detail::kIsCodec<T>) {
      const float q = static_cast<float>(divisor);
      alignas(64) float buf[detail::kStageElems];
      for (size_t off = 0; off < n; off += detail::kStageElems) {
        const size_t m = std::min(detail::kStageElems, n - off);
        T::toFloat(buf, static_cast<const char*>(src) + 2 * off, m);
        divideFloat<float>(buf, buf, m, q);
        T::fromFloat(static_cast<char*>(dst) + 2 * off, buf, m);
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      divideFloat<T>(static_cast<UA<T>*>(dst), static_cast<const UA<T>*>(src), n,
                     static_cast<T>(divisor));
    } else {
      divideInt<T>(static_cast<UA<T>*>(dst), static_cast<const UA<T>*>(src), n, divisor);
    }
  }
};

}  // namespace

void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  detail::checkArgs("divide", type, RedOp::kSum);
  if (divisor == 0) detail::badArgument("divide", "divisor 0");
  if (count == 0) return;
  // The op is irrelevant; kSum instantiates each type once.
  detail::dispatch<DivideKernel>("divide", type, RedOp::kSum, dst, src, count, divisor);
}

}  // namespace braid::kernels
