// Bulk float16/bfloat16 <-> float32 conversions used by the kernels (internal to kernels/, and
// used by its tests). Uses F16C / AVX-512 where the build enables them, else the scalar code of
// element_ops.h; both give identical bits (round to nearest even, NaN quieted).
#pragma once

#include <cstddef>

namespace braid::kernels::detail {

/// out[i] = float(in[i]) for n binary16 values at `in` (any alignment).
void halfToFloatN(float* out, const void* in, size_t n);
/// out[i] = half(in[i]) (round to nearest even) for n values; `out` may have any alignment.
void floatToHalfN(void* out, const float* in, size_t n);
/// out[i] = float(in[i]) for n bfloat16 values at `in` (any alignment).
void bfloat16ToFloatN(float* out, const void* in, size_t n);
/// out[i] = bfloat16(in[i]) (round to nearest even) for n values; `out` may have any alignment.
void floatToBfloat16N(void* out, const float* in, size_t n);

}  // namespace braid::kernels::detail
