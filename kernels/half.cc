// The public scalar float16/bfloat16 conversions: the shared definitions of element_ops.h.
#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::kernels {

float halfToFloat(uint16_t h) { return halfBitsToFloat(h); }
uint16_t floatToHalf(float f) { return floatToHalfBits(f); }
float bfloat16ToFloat(uint16_t b) { return bfloat16BitsToFloat(b); }
uint16_t floatToBfloat16(float f) { return floatToBfloat16Bits(f); }

}  // namespace braid::kernels
