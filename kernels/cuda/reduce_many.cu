// reduceManyAsync: dst = srcs[0] op srcs[1] op ... (left to right), accumulated in the compute
// type (float32 for the half types) and rounded once; the gather-reduce of one-shot schedules.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_elem.cuh"

namespace braid::kernels::cuda {
namespace detail {
namespace {

/// The source pointers travel by value in the launch parameters (kMaxSources * 8 bytes).
struct Sources {
  const void* p[kMaxSources];
};

template <typename T, typename Op>
__device__ __forceinline__ typename Traits<T>::S reduceAt(const Sources& srcs, int nsrc, size_t i,
                                                          uint64_t divisor) {
  using Tr = Traits<T>;
  using S = typename Tr::S;
  typename Tr::C acc = Tr::load(static_cast<const S*>(srcs.p[0])[i]);
  for (int k = 1; k < nsrc; ++k) acc = Op()(acc, Tr::load(static_cast<const S*>(srcs.p[k])[i]));
  const S r = Tr::store(acc);
  return divisor > 1 ? divideElem<T>(r, divisor) : r;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduceManyKernel(typename Traits<T>::S* dst, Sources srcs, int nsrc, size_t count,
                     uint64_t divisor, bool vectorOk) {
  using Tr = Traits<T>;
  using S = typename Tr::S;
  using C = typename Tr::C;
  using V = Vec<S>;
  const size_t tid = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t nvec = vectorOk ? count / V::kN : 0;
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    C acc[kUnroll][V::kN];
    // Source 0 seeds the accumulators; every later source is loaded kUnroll vectors at a time.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        V v;
        v.raw = loadVec(static_cast<const S*>(srcs.p[0]) + i * V::kN);
#pragma unroll
        for (int k = 0; k < V::kN; ++k) acc[u][k] = Tr::load(v.e[k]);
      }
    }
    for (int s = 1; s < nsrc; ++s) {
      V v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * stride;
        if (i < nvec) v[u].raw = loadVec(static_cast<const S*>(srcs.p[s]) + i * V::kN);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < V::kN; ++k) acc[u][k] = Op()(acc[u][k], Tr::load(v[u].e[k]));
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        V r;
#pragma unroll
        for (int k = 0; k < V::kN; ++k) {
          const S s = Tr::store(acc[u][k]);
          r.e[k] = divisor > 1 ? divideElem<T>(s, divisor) : s;
        }
        reinterpret_cast<uint4*>(dst)[i] = r.raw;
      }
    }
  }
  for (size_t i = nvec * V::kN + tid; i < count; i += stride) {
    dst[i] = reduceAt<T, Op>(srcs, nsrc, i, divisor);
  }
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
