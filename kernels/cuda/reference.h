// CPU references of the CUDA kernels (cuda_kernels.h), element by element from the same
// operators (kernels/element_ops.h), for tests and the validate-and-time harness. Header-only,
// host-only, deliberately simple (no vectors): what the kernels must equal bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "braid/types.hpp"
#include "kernels/element_ops.h"

namespace braid::kernels::cuda::reference {

namespace detail {

template <typename T>
T loadAt(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void storeAt(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

/// Integer division truncated toward zero for any divisor >= 1 (kernels::divide semantics).
template <typename T>
T divideInt(T x, uint64_t d) {
  if constexpr (std::is_signed_v<T>) {
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (d > kMax) {
      return (static_cast<int64_t>(x) == std::numeric_limits<int64_t>::min() && d == kMax + 1)
                 ? T(-1)
                 : T(0);
    }
    return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(d));
  } else {
    return static_cast<T>(static_cast<uint64_t>(x) / d);
  }
}

/// Element i of the reduction of `n` sources, then divided when divisor > 1; written to dst.
template <typename T>
void one(void* dst, const void* const* srcs, int n, size_t i, RedOp op, uint64_t divisor,
         DataType type) {
  if constexpr (std::is_same_v<T, uint16_t>) {  // float16 / bfloat16 bits
    const bool half = type == DataType::kFloat16;
    auto toF = [&](uint16_t b) { return half ? halfBitsToFloat(b) : bfloat16BitsToFloat(b); };
    auto toB = [&](float f) { return half ? floatToHalfBits(f) : floatToBfloat16Bits(f); };
    float acc = toF(loadAt<uint16_t>(srcs[0], i));
    for (int k = 1; k < n; ++k) acc = applyOp(op, acc, toF(loadAt<uint16_t>(srcs[k], i)));
    uint16_t r = toB(acc);
    if (divisor > 1) r = toB(toF(r) / static_cast<float>(divisor));
    storeAt(dst, i, r);
  } else {
    T acc = loadAt<T>(srcs[0], i);
    for (int k = 1; k < n; ++k) acc = applyOp(op, acc, loadAt<T>(srcs[k], i));
    if (divisor > 1) {
      if constexpr (std::is_floating_point_v<T>) {
        acc = acc / static_cast<T>(divisor);
      } else {
        acc = divideInt<T>(acc, divisor);
      }
    }
    storeAt(dst, i, acc);
  }
}

/// The 16-bit floats as their bits: the reference converts them itself.
template <typename F>
void byType(DataType type, F&& f) {
  visitDataType<uint16_t, uint16_t>(type, std::forward<F>(f));
}

}  // namespace detail

/// reduceManyAsync's result on the CPU. dst may alias any source exactly.
inline void reduceMany(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                       RedOp op, uint64_t divisor = 1) {
  detail::byType(type, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) detail::one<T>(dst, srcs, nsrc, i, op, divisor, type);
  });
}

/// reduceCopyAsync's result on the CPU (dst1 may be nullptr).
inline void reduceCopy(void* dst0, void* dst1, const void* a, const void* b, size_t count,
                       DataType type, RedOp op, uint64_t divisor = 1) {
  const void* srcs[2] = {a, b};
  reduceMany(dst0, srcs, 2, count, type, op, divisor);
  if (dst1 != nullptr && dst1 != dst0) std::memmove(dst1, dst0, count * dataTypeSize(type));
}

/// divideAsync's result on the CPU.
inline void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  const void* srcs[1] = {src};
  reduceMany(dst, srcs, 1, count, type, RedOp::kSum, divisor);
}

}  // namespace braid::kernels::cuda::reference
