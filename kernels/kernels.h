// CPU element kernels: reduce, fused reduce-copy, multi-input reduce, average finalize, scale,
// copy.
// The one public header of kernels/. Includes nothing of braid's but kernels/types.h.
//
// Contract for every function: `count` is in elements of `type`; pointers need no alignment;
// an output may alias an input exactly (dst == a or dst == b) but must not partially overlap it.
// float16 and bfloat16 are computed in float32 and rounded to nearest-even once per call.
// Integer sum/prod wrap (two's complement, computed unsigned so no UB).
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/types.hpp"

namespace braid::kernels {

/// dst[i] = a[i] op b[i]. For kAvg this is a sum (see divide()).
void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op);

/// dst0[i] = dst1[i] = a[i] op b[i], in one pass (the result is written to both).
void reduceCopy(void* dst0, void* dst1, const void* a, const void* b, size_t count, DataType type,
                RedOp op);

/// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], accumulated left to right in that
/// order (so every rank that calls it with the same inputs gets the same bits); for float16 and
/// bfloat16 accumulated in float32 and rounded once. nsrc >= 1. dst may alias any source exactly
/// (srcs[0] costs nothing; a later one a copy through the stack per chunk).
void reduceMany(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                RedOp op);

/// dst[i] = src[i] / divisor (the finalize step of kAvg). Floats divide in their own precision
/// (half types through float32); integers divide with truncation toward zero. dst may alias src.
void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);

/// dst[i] = src[i] * scalar (the NCCL API's PreMulSum scaling): the product in double, converted
/// to the element type (half types through float32). dst may alias src.
void scale(void* dst, const void* src, size_t count, DataType type, double scalar);

/// memcpy that is fast for the sizes collectives move (non-temporal stores for large copies).
void copy(void* dst, const void* src, size_t bytes);

/// Copies with streaming (non-temporal) stores whatever the size, for destinations that will not
/// be read again soon (a large collective's final output): no read-for-ownership, and the cache
/// stays with the data in flight. Ends with a store fence.
void copyStreaming(void* dst, const void* src, size_t bytes);

/// The float32 <-> float16/bfloat16 conversions the kernels use (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

/// Writes `value` as element `index` of a buffer of `type`, converted as the type converts
/// (integers truncate, 16-bit floats round to nearest even). For references and fills in tests
/// and benches, not for loops that must be fast.
void storeElement(DataType type, void* buffer, size_t index, double value);
/// Element `index` of a buffer of `type`, as a double.
double loadElement(DataType type, const void* buffer, size_t index);

}  // namespace braid::kernels
