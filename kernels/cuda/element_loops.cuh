// The element loops of kernels/cuda/, as device functions over a share of the work: thread `tid`
// of `stride` threads handles elements tid, tid + stride, ... (16-byte vectors when every pointer
// is 16-byte aligned, kUnroll of them in flight per operand, all loads issued before any
// arithmetic; a scalar path for misaligned pointers and tails). The one-op kernels (reduce.cu,
// reduce_many.cu) run them over their whole grid; the executor kernel (executor.cu) over one
// block per chunk of a command. Internal to kernels/cuda/.
//
// Loads go through a policy: ReadOnlyLoads (the read-only data path) for kernels that read only
// what finished kernels wrote; CoherentLoads (L2 only) for the executor, a kernel that reads slots
// its peers refill while it runs: the read-only and L1 caches are not kept coherent within a
// kernel, so a line cached for an earlier command could be read stale.
#pragma once

#include "kernels/cuda/device_elem.cuh"

namespace braid::kernels::cuda::detail {

struct ReadOnlyLoads {
  static __device__ __forceinline__ uint4 vec(const void* p) {
    return __ldg(static_cast<const uint4*>(p));
  }
  template <typename S>
  static __device__ __forceinline__ S elem(const S* p) {
    return *p;
  }
};

struct CoherentLoads {
  static __device__ __forceinline__ uint4 vec(const void* p) {
    return __ldcg(static_cast<const uint4*>(p));
  }
  template <typename S>
  static __device__ __forceinline__ S elem(const S* p) {
    return *static_cast<const volatile S*>(p);
  }
};

/// dst0[i] = a[i] op b[i] (divided when divisor > 1), and dst1[i] too unless null.
template <typename T, typename Op, typename L>
__device__ __forceinline__ void reduceCopyLoop(typename Traits<T>::S* dst0,
                                               typename Traits<T>::S* dst1,
                                               const typename Traits<T>::S* a,
                                               const typename Traits<T>::S* b, size_t count,
                                               uint64_t divisor, bool vectorOk, size_t tid,
                                               size_t stride) {
  using S = typename Traits<T>::S;
  using V = Vec<S>;
  const size_t nvec = vectorOk ? count / V::kN : 0;
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    V va[kUnroll], vb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        va[u].raw = L::vec(a + i * V::kN);
        vb[u].raw = L::vec(b + i * V::kN);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        V r;
#pragma unroll
        for (int k = 0; k < V::kN; ++k) r.e[k] = reduceElem<T, Op>(va[u].e[k], vb[u].e[k], divisor);
        reinterpret_cast<uint4*>(dst0)[i] = r.raw;
        if (dst1 != nullptr) reinterpret_cast<uint4*>(dst1)[i] = r.raw;
      }
    }
  }
  for (size_t i = nvec * V::kN + tid; i < count; i += stride) {
    const S r = reduceElem<T, Op>(L::elem(a + i), L::elem(b + i), divisor);
    dst0[i] = r;
    if (dst1 != nullptr) dst1[i] = r;
  }
}

/// dst[i] = src[i] / divisor.
template <typename T, typename L>
__device__ __forceinline__ void divideLoop(typename Traits<T>::S* dst,
                                           const typename Traits<T>::S* src, size_t count,
                                           uint64_t divisor, size_t tid, size_t stride) {
  for (size_t i = tid; i < count; i += stride) dst[i] = divideElem<T>(L::elem(src + i), divisor);
}

/// `bytes` from src to dst0, and to dst1 too unless null (one read).
template <typename L>
__device__ __forceinline__ void copyLoop(char* dst0, char* dst1, const char* src, size_t bytes,
                                         bool vectorOk, size_t tid, size_t stride) {
  const size_t nvec = vectorOk ? bytes / 16 : 0;
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) v[u] = L::vec(src + i * 16);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        reinterpret_cast<uint4*>(dst0)[i] = v[u];
        if (dst1 != nullptr) reinterpret_cast<uint4*>(dst1)[i] = v[u];
      }
    }
  }
  for (size_t i = nvec * 16 + tid; i < bytes; i += stride) {
    const char c = L::elem(src + i);
    dst0[i] = c;
    if (dst1 != nullptr) dst1[i] = c;
  }
}

/// dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i] (left to right, in the compute type, rounded
/// once), divided when divisor > 1. `offset` elements into every source (a chunk of them);
/// `Srcs` is anything with `const void* operator[](int) const`.
template <typename T, typename Op, typename L, typename Srcs>
__device__ __forceinline__ void reduceManyLoop(typename Traits<T>::S* dst, const Srcs& srcs,
                                               int nsrc, size_t offset, size_t count,
                                               uint64_t divisor, bool vectorOk, size_t tid,
                                               size_t stride) {
  using Tr = Traits<T>;
  using S = typename Tr::S;
  using C = typename Tr::C;
  using V = Vec<S>;
  const auto src = [&](int k) { return static_cast<const S*>(srcs[k]) + offset; };
  const size_t nvec = vectorOk ? count / V::kN : 0;
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    C acc[kUnroll][V::kN];
    // Source 0 seeds the accumulators; every later source is loaded kUnroll vectors at a time.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        V v;
        v.raw = L::vec(src(0) + i * V::kN);
#pragma unroll
        for (int k = 0; k < V::kN; ++k) acc[u][k] = Tr::load(v.e[k]);
      }
    }
    for (int s = 1; s < nsrc; ++s) {
      V v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * stride;
        if (i < nvec) v[u].raw = L::vec(src(s) + i * V::kN);
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
    C acc = Tr::load(L::elem(src(0) + i));
    for (int k = 1; k < nsrc; ++k) acc = Op()(acc, Tr::load(L::elem(src(k) + i)));
    const S r = Tr::store(acc);
    dst[i] = divisor > 1 ? divideElem<T>(r, divisor) : r;
  }
}

}  // namespace braid::kernels::cuda::detail
