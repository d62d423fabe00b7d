// reduceManyAsync: dst = srcs[0] op srcs[1] op ... (left to right), accumulated in the compute
// type (float32 for the half types) and rounded once; the gather-reduce of one-shot schedules.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_loops.cuh"

namespace braid::kernels::cuda {
namespace detail {
namespace {

/// The source pointers travel by value in the launch parameters (kMaxSources * 8 bytes).
struct Sources {
  const void* p[kMaxSources];
  __device__ __forceinline__ const void* operator[](int k) const { return p[k]; }
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduceManyKernel(typename Traits<T>::S* dst, Sources srcs, int nsrc, size_t count,
                     uint64_t divisor, bool vectorOk) {
  reduceManyLoop<T, Op, ReadOnlyLoads>(dst, srcs, nsrc, 0, count, divisor, vectorOk,
                                       blockIdx.x * size_t(blockDim.x) + threadIdx.x,
                                       size_t(gridDim.x) * blockDim.x);
}

struct ReduceMany {
  template <typename T, typename Op>
  static int run(void* dst, const Sources* srcs, int nsrc, size_t count, uint64_t divisor,
                 cudaStream_t stream) {
    using S = typename Traits<T>::S;
    bool vectorOk = aligned16(dst);
    for (int k = 0; k < nsrc; ++k) vectorOk = vectorOk && aligned16(srcs->p[k]);
    const size_t items = vectorOk ? count / Vec<S>::kN + 1 : count;
    reduceManyKernel<T, Op><<<blocksFor(items, vectorOk ? kUnroll : 1), kThreads, 0, stream>>>(
        static_cast<S*>(dst), *srcs, nsrc, count, divisor, vectorOk);
    return static_cast<int>(cudaGetLastError());
  }
};

struct LoadReduceMany {
  template <typename T, typename Op>
  static int run() {
    cudaFuncAttributes attr;
    return static_cast<int>(cudaFuncGetAttributes(&attr, reduceManyKernel<T, Op>));
  }
};

}  // namespace

int loadReduceManyKernels() {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumRedOps; ++o) {
      const int err = dispatch<LoadReduceMany>("loadAllKernels", DataType(t), RedOp(o));
      if (err != 0) return err;
    }
  }
  return 0;
}

}  // namespace detail

int reduceManyAsync(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                    RedOp op, uint64_t divisor, void* stream) {
  if (nsrc < 1 || nsrc > kMaxSources) {
    detail::badArgument("reduceManyAsync", "nsrc " + std::to_string(nsrc) + " outside [1, " +
                                               std::to_string(kMaxSources) + "]");
  }
  if (count == 0) return 0;
  detail::Sources s{};
  for (int k = 0; k < nsrc; ++k) s.p[k] = srcs[k];
  return detail::dispatch<detail::ReduceMany>("reduceManyAsync", type, op, dst,
                                              static_cast<const detail::Sources*>(&s), nsrc, count,
                                              divisor, static_cast<cudaStream_t>(stream));
}

}  // namespace braid::kernels::cuda
