// Device-side element traits shared by the .cu files of kernels/cuda/: storage vs compute types,
// the per-element reduce/divide built on kernels/element_ops.h, 16-byte vector access and the
// dtype x op dispatch. Internal to kernels/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/element_ops.h"
#include "braid/types.hpp"

namespace braid::kernels::cuda::detail {

/// Tags for the 16-bit float formats (stored as raw bits, computed in float32).
struct Half {};
struct BFloat16 {};

/// Storage type S and compute type C of an element type T, with the conversions between them.
template <typename T>
struct Traits {
  using S = T;
  using C = T;
  static __device__ __forceinline__ C load(S s) { return s; }
  static __device__ __forceinline__ S store(C c) { return c; }
};
template <>
struct Traits<Half> {
  using S = uint16_t;
  using C = float;
  static __device__ __forceinline__ C load(S s) { return halfBitsToFloat(s); }
  static __device__ __forceinline__ S store(C c) { return floatToHalfBits(c); }
};
template <>
struct Traits<BFloat16> {
  using S = uint16_t;
  using C = float;
  static __device__ __forceinline__ C load(S s) { return bfloat16BitsToFloat(s); }
  static __device__ __forceinline__ S store(C c) { return floatToBfloat16Bits(c); }
};

/// x / divisor for the finalize of kAvg, exactly as kernels::divide(): floats in their own
/// precision (the half types staged through float32), integers truncated toward zero.
template <typename T>
__device__ __forceinline__ typename Traits<T>::S divideElem(typename Traits<T>::S x,
                                                            uint64_t divisor) {
  using S = typename Traits<T>::S;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return Traits<T>::store(Traits<T>::load(x) / static_cast<float>(divisor));
  } else if constexpr (std::is_floating_point_v<S>) {
    return x / static_cast<S>(divisor);
  } else if constexpr (std::is_signed_v<S>) {
    constexpr uint64_t kMax64 = static_cast<uint64_t>(INT64_MAX);
    if (divisor <= static_cast<uint64_t>(std::numeric_limits<S>::max())) {
      return static_cast<S>(x / static_cast<S>(divisor));
    }
    if (divisor > kMax64) {
      return (static_cast<int64_t>(x) == INT64_MIN && divisor == kMax64 + 1) ? S(-1) : S(0);
    }
    return static_cast<S>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
  } else {
    return static_cast<S>(static_cast<uint64_t>(x) / divisor);
  }
}

/// a op b on storage values (computed in the compute type, rounded once), then divided when
/// divisor > 1.
template <typename T, typename Op>
__device__ __forceinline__ typename Traits<T>::S reduceElem(typename Traits<T>::S a,
                                                            typename Traits<T>::S b,
                                                            uint64_t divisor) {
  using Tr = Traits<T>;
  typename Tr::S r = Tr::store(Op()(Tr::load(a), Tr::load(b)));
  return divisor > 1 ? divideElem<T>(r, divisor) : r;
}

/// 16 bytes of elements, reinterpreted through a union (no aliasing games in the compiler's eyes).
template <typename S>
union Vec {
  static constexpr int kN = 16 / sizeof(S);
  uint4 raw;
  S e[kN];
};

__host__ __device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

[[noreturn]] inline void badArgument(const char* what, const std::string& detail) {
  throw std::invalid_argument(std::string("braid::kernels::cuda::") + what + ": " + detail);
}

/// Calls Fn::template run<T, Op>(args...) for the run-time type and op (kAvg as kSum).
template <typename Fn, typename... Args>
int dispatch(const char* what, DataType type, RedOp op, Args... args) {
  auto withOp = [&](auto tag) -> int {
    using T = decltype(tag);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        return Fn::template run<T, SumOp>(args...);
      case RedOp::kProd:
        return Fn::template run<T, ProdOp>(args...);
      case RedOp::kMax:
        return Fn::template run<T, MaxOp>(args...);
      case RedOp::kMin:
        return Fn::template run<T, MinOp>(args...);
    }
    badArgument(what, "invalid reduction op " + std::to_string(unsigned(op)));
  };
  if (!isValid(type)) badArgument(what, "invalid data type " + std::to_string(unsigned(type)));
  return visitDataType<Half, BFloat16>(type, withOp);
}

/// loadAllKernels()'s halves, one per .cu file (each loads its own file's kernels).
int loadTwoInputKernels();
int loadReduceManyKernels();
int loadScaleKernels();

constexpr int kThreads = 512;  ///< threads per block
constexpr int kUnroll = 4;     ///< 16-byte vectors in flight per thread per operand

/// Blocks for `items` work items of kThreads * per each, at least 1, at most 2^20 (grid-stride
/// loops cover the rest).
inline unsigned blocksFor(size_t items, size_t per) {
  size_t b = (items + kThreads * per - 1) / (kThreads * per);
  if (b < 1) b = 1;
  if (b > (1u << 20)) b = 1u << 20;
  return static_cast<unsigned>(b);
}

}  // namespace braid::kernels::cuda::detail
