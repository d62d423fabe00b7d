// fp16 (--precision fp16) kernels: float32 <-> half conversions for the half GEMM/convolution
// operands and the half gradient all-reduce, and the unscale with its inf/NaN flag. Each launches
// on `stream` and checks the launch.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace braid::trainer::cuda {

/// out[i] = half(in[i]) (round to nearest; beyond the half range: inf).
void floatToHalf(const float* in, __half* out, size_t n, cudaStream_t stream);
/// out[i] = float(in[i]).
void halfToFloat(const __half* in, float* out, size_t n, cudaStream_t stream);
/// out[i] += float(in[i]) (a half parameter gradient into the float32 flat gradients).
void addHalfToFloat(const __half* in, float* out, size_t n, cudaStream_t stream);
/// out[i] = float(in[i]) / scale; *overflow = 1 where some out[i] is inf or NaN (never reset
/// here: zero it before the step's first bucket).
void unscaleHalf(const __half* in, float* out, size_t n, float scale, int32_t* overflow,
                 cudaStream_t stream);

}  // namespace braid::trainer::cuda
