// CUDA element kernels: reduce, fused reduce-copy, multi-input reduce, average finalize, scale
// and copy on device memory, enqueued on a caller's stream. The public header of kernels/cuda/; it needs
// no CUDA headers (streams travel as void*, a cudaStream_t cast; nullptr is the legacy default
// stream). Includes nothing of braid's but kernels/types.h.
//
// Semantics are those of the CPU kernels (kernels/kernels.h), bit for bit, because both use the
// element operators of kernels/element_ops.h: integers wrap, float max/min propagate NaN,
// float16/bfloat16 compute in float32 and round to nearest even once per call, reduceMany
// accumulates left to right in float32 for the half types and rounds once. With a divisor (the
// kAvg finalize) the rounded result is divided exactly as kernels::divide() does, so a fused
// call equals reduce() followed by divide(). One exception, as between any two float
// implementations: the sign and payload of a NaN made by arithmetic (inf - inf, 0 * inf, NaN op
// NaN) are unspecified (GPUs return a canonical NaN); NaN-ness itself is always kept.
//
// Pointers need no alignment (16-byte aligned ones take the vector path: 16-byte loads and
// stores, several in flight per thread). Outputs may alias inputs exactly, never partially.
// Every function returns 0 once the work is enqueued, or the cudaError_t (as int) of the launch;
// it never synchronises. Invalid dtype/op/nsrc throw std::invalid_argument (callers validate).
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/types.hpp"

namespace braid::kernels::cuda {

/// Most sources reduceManyAsync() takes in one launch.
constexpr int kMaxSources = 64;

/// dst0[i] = a[i] op b[i] (divided by `divisor` when divisor > 1), and dst1[i] the same when
/// dst1 != nullptr (one pass: the fused reduce-copy). kAvg reduces as a sum.
int reduceCopyAsync(void* dst0, void* dst1, const void* a, const void* b, size_t count,
                    DataType type, RedOp op, uint64_t divisor, void* stream);

/// dst[i] = a[i] op b[i]; reduceCopyAsync without a second output or divisor.
inline int reduceAsync(void* dst, const void* a, const void* b, size_t count, DataType type,
                       RedOp op, void* stream) {
  return reduceCopyAsync(dst, nullptr, a, b, count, type, op, 1, stream);
}

/// dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i] (left to right), divided by `divisor` when
/// divisor > 1. 1 <= nsrc <= kMaxSources. dst may alias any source exactly.
int reduceManyAsync(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                    RedOp op, uint64_t divisor, void* stream);

/// dst[i] = src[i] / divisor (kernels::divide semantics); divisor >= 1.
int divideAsync(void* dst, const void* src, size_t count, DataType type, uint64_t divisor,
                void* stream);

/// dst[i] = src[i] * scalar (the NCCL API's PreMulSum scaling): the product in double, converted
/// to the element type (the 16-bit floats through float32), as nccl/premul.cc on the CPU. With
/// scalarAt (device memory, one element of `type`) the kernel reads the scalar when it runs.
/// dst may alias src exactly.
int scaleAsync(void* dst, const void* src, size_t count, DataType type, double scalar,
               const void* scalarAt, void* stream);

/// Copies `bytes` from src to dst0, and to dst1 as well when dst1 != nullptr (one read), with a
/// kernel (never the driver's memcpy, which takes a context-wide lock).
int copyAsync(void* dst0, void* dst1, const void* src, size_t bytes, void* stream);

/// Loads every kernel above into the current device's context now, and returns 0 or the first
/// cudaError_t (as int). CUDA loads kernels lazily (CUDA_MODULE_LOADING=LAZY, the default), at
/// their first launch, and a lazy load waits until the context's running work drains: a first
/// launch from a progress thread while some stream waits for that very thread (a device
/// collective's stream wait) would deadlock. Device communicators call this before any wait.
int loadAllKernels();

/// The CUDA runtime's text for an error returned above.
const char* errorString(int error);

}  // namespace braid::kernels::cuda
