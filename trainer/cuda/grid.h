// The launch shape the trainer's elementwise kernels share (kernels.cu, half_kernels.cu): blocks
// of kThreads, a grid capped so huge arrays loop (grid-stride), never an empty grid.
#pragma once

#include <cstddef>

namespace braid::trainer::cuda {

constexpr int kThreads = 256;

inline unsigned blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b == 0 ? 1 : b) : 65535 * 16);
}

}  // namespace braid::trainer::cuda

#define BRAID_GRID_STRIDE(i, n)                                                        \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(blockDim.x) * gridDim.x)
