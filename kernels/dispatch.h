// One switch on (dtype, op) per call, outside the element loops: dispatch() instantiates
// Kernel<T, Op>::run for the element type T (or a Half/BFloat16 codec tag) and the op functor.
// Internal to kernels/.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "braid/types.hpp"
#include "kernels/convert.h"
#include "kernels/element_ops.h"
#include "kernels/loops.h"

namespace braid::kernels::detail {

/// Tag for binary16 buffers: element loops use Elem; staged paths (reduceMany, divide) convert
/// whole blocks through these bulk conversions.
struct HalfCodec {
  using Elem = HalfElem;
  static void toFloat(float* out, const void* in, size_t n) { halfToFloatN(out, in, n); }
  static void fromFloat(void* out, const float* in, size_t n) { floatToHalfN(out, in, n); }
};

/// Tag for bfloat16 buffers: as HalfCodec.
struct BFloat16Codec {
  using Elem = BFloat16Elem;
  static void toFloat(float* out, const void* in, size_t n) { bfloat16ToFloatN(out, in, n); }
  static void fromFloat(void* out, const float* in, size_t n) { floatToBfloat16N(out, in, n); }
};

template <typename T>
inline constexpr bool kIsCodec = std::is_same_v<T, HalfCodec> || std::is_same_v<T, BFloat16Codec>;

/// Elements of a float16/bfloat16 chunk staged through float32 buffers on the stack.
inline constexpr size_t kStageElems = 512;

[[noreturn]] inline void badArgument(const char* what, const std::string& detail) {
  throw std::invalid_argument(std::string("braid::kernels::") + what + ": " + detail);
}

/// Throws std::invalid_argument (naming `what`) for a dtype or op outside the enums.
inline void checkArgs(const char* what, DataType type, RedOp op) {
  if (!isValid(type)) {
    badArgument(what, "invalid data type " + std::to_string(static_cast<unsigned>(type)));
  }
  if (!isValid(op)) {
    badArgument(what, "invalid reduction op " + std::to_string(static_cast<unsigned>(op)));
  }
}

template <template <typename, typename> class Kernel, typename T, typename... Args>
inline void dispatchOp(const char* what, RedOp op, Args... args) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:  // avg reduces as a sum; divide() finalizes it
      return Kernel<T, SumOp>::run(args...);
    case RedOp::kProd:
      return Kernel<T, ProdOp>::run(args...);
    case RedOp::kMax:
      return Kernel<T, MaxOp>::run(args...);
    case RedOp::kMin:
      return Kernel<T, MinOp>::run(args...);
  }
  badArgument(what, "invalid reduction op " + std::to_string(static_cast<unsigned>(op)));
}

/// Calls Kernel<T, Op>::run(args...) for `type` and `op`; throws std::invalid_argument (naming
/// `what`) for a value outside the enums.
template <template <typename, typename> class Kernel, typename... Args>
inline void dispatch(const char* what, DataType type, RedOp op, Args... args) {
  if (!isValid(type)) {
    badArgument(what, "invalid data type " + std::to_string(static_cast<unsigned>(type)));
  }
  visitDataType<HalfCodec, BFloat16Codec>(
      type, [&](auto tag) { dispatchOp<Kernel, decltype(tag)>(what, op, args...); });
}

}  // namespace braid::kernels::detail
