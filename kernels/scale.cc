// scale(): dst[i] = src[i] * scalar, the NCCL API's PreMulSum scaling before its sum, element by
// element with scaleElem (kernels/element_ops.h; the 16-bit floats through float32), which the
// CUDA kernel (kernels/cuda/scale.cu) uses too.
#include <cstring>
#include <type_traits>

#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::kernels {

void scale(void* dst, const void* src, size_t count, DataType type, double scalar) {
  // Element by element through memcpy: no alignment needed, and dst may alias src exactly.
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  visitDataType<uint16_t, uint16_t>(type, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) {
      T x;
      std::memcpy(&x, in + i * sizeof(T), sizeof(T));
      T y;
      if constexpr (std::is_same_v<T, uint16_t>) {  // float16 / bfloat16 bits
        const bool half = type == DataType::kFloat16;
        const float v = scaleElem(half ? halfBitsToFloat(x) : bfloat16BitsToFloat(x), scalar);
        y = half ? floatToHalfBits(v) : floatToBfloat16Bits(v);
      } else {
        y = scaleElem(x, scalar);
      }
      std::memcpy(out + i * sizeof(T), &y, sizeof(T));
    }
  });
}

}  // namespace braid::kernels
