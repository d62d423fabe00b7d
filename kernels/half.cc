// The public scalar conversions: float16/bfloat16 (the shared definitions of element_ops.h), and
// one element of any type to and from a double.
#include <cstring>
#include <type_traits>

#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::kernels {

float halfToFloat(uint16_t h) { return halfBitsToFloat(h); }
uint16_t floatToHalf(float f) { return floatToHalfBits(f); }
float bfloat16ToFloat(uint16_t b) { return bfloat16BitsToFloat(b); }
uint16_t floatToBfloat16(float f) { return floatToBfloat16Bits(f); }

void storeElement(DataType type, void* buffer, size_t index, double value) {
  visitDataType(type, [&](auto tag) {
    using T = decltype(tag);
    auto put = [&](const auto& x) {
      std::memcpy(static_cast<char*>(buffer) + index * sizeof(x), &x, sizeof(x));
    };
    if constexpr (std::is_same_v<T, Float16Storage>) {
      put(floatToHalfBits(static_cast<float>(value)));
    } else if constexpr (std::is_same_v<T, BFloat16Storage>) {
      put(floatToBfloat16Bits(static_cast<float>(value)));
    } else {
      put(static_cast<T>(value));
    }
  });
}

double loadElement(DataType type, const void* buffer, size_t index) {
  return visitDataType(type, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Float16Storage> || std::is_same_v<T, BFloat16Storage>) {
      uint16_t bits;
      std::memcpy(&bits, static_cast<const char*>(buffer) + index * 2, 2);
      return std::is_same_v<T, Float16Storage> ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
    } else {
      T x;
      std::memcpy(&x, static_cast<const char*>(buffer) + index * sizeof(T), sizeof(T));
      return static_cast<double>(x);
    }
  });
}

}  // namespace braid::kernels
