#include "trainer/cuda/grid.h"
#include "trainer/cuda/half_kernels.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {
namespace {

__global__ void floatToHalfKernel(const float* in, __half* out, size_t n) {
  BRAID_GRID_STRIDE(i, n) out[i] = __float2half_rn(in[i]);
}

__global__ void halfToFloatKernel(const __half* in, float* out, size_t n) {
  BRAID_GRID_STRIDE(i, n) out[i] = __half2float(in[i]);
}

__global__ void addHalfToFloatKernel(const __half* in, float* out, size_t n) {
  BRAID_GRID_STRIDE(i, n) out[i] += __half2float(in[i]);
}

__global__ void unscaleHalfKernel(const __half* in, float* out, size_t n, float scale,
                                  int32_t* overflow) {
  bool bad = false;
  BRAID_GRID_STRIDE(i, n) {
    const float g = __half2float(in[i]) / scale;  // as the CPU path: divided, not multiplied
    out[i] = g;
    bad = bad || !isfinite(g);
  }
  if (bad) *overflow = 1;  // racing writes all store 1
}

}  // namespace

void floatToHalf(const float* in, __half* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  floatToHalfKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
  checkLaunch("floatToHalf", n);
}

void halfToFloat(const __half* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  halfToFloatKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
  checkLaunch("halfToFloat", n);
}

void addHalfToFloat(const __half* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  addHalfToFloatKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
  checkLaunch("addHalfToFloat", n);
}

void unscaleHalf(const __half* in, float* out, size_t n, float scale, int32_t* overflow,
                 cudaStream_t stream) {
  if (n == 0) return;
  unscaleHalfKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n, scale, overflow);
  checkLaunch("unscaleHalf", n);
}

}  // namespace braid::trainer::cuda
