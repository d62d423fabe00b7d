// reduce, reduceCopy and reduceMany: one (dtype, op) dispatch per call, then element loops.
// float16 goes through F16C/AVX-512 blocks where available; bfloat16's conversions vectorise as
// integer ops; reduceMany of either accumulates in float32 and rounds once per element.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/half_simd.h"
#include "kernels/kernels.h"
#include "kernels/loops.h"

namespace braid::kernels {
namespace {

using detail::HalfCodec;
using detail::kIsCodec;
using detail::kStageElems;
using detail::Plain;
using detail::UA;

/// Bytes of output per chunk in reduceCopy/reduceMany: small enough to stay in L1 between passes.
constexpr size_t kChunkBytes = 8192;

template <typename T>
constexpr size_t elemSize() {
  if constexpr (kIsCodec<T>) {
    return 2;
  } else {
    return sizeof(T);
  }
}

template <typename T>
const char* at(const void* p, size_t elem) {
  return static_cast<const char*>(p) + elem * elemSize<T>();
}

template <typename T>
char* at(void* p, size_t elem) {
  return static_cast<char*>(p) + elem * elemSize<T>();
}

template <typename T, typename Op>
struct ReduceKernel {
  static void run(void* dst, const void* a, const void* b, size_t n) {
    if constexpr (std::is_same_v<T, HalfCodec>) {
      size_t done = 0;
#if BRAID_KERNELS_HALF_SIMD
      done = detail::halfReduceBlocks<Op>(dst, a, b, n);
#endif
      detail::reduceAliased<detail::HalfElem, Op>(at<T>(dst, done), at<T>(a, done), at<T>(b, done),
                                                  n - done);
    } else if constexpr (kIsCodec<T>) {
      detail::reduceAliased<typename T::Elem, Op>(dst, a, b, n);
    } else {
      detail::reduceAliased<Plain<T>, Op>(dst, a, b, n);
    }
  }
};

template <typename T, typename Op>
struct ReduceCopyKernel {
  static void run(void* dst0, void* dst1, const void* a, const void* b, size_t n) {
    constexpr size_t kChunk = kChunkBytes / elemSize<T>();
    for (size_t off = 0; off < n; off += kChunk) {
      const size_t m = std::min(kChunk, n - off);
      // The chunk of dst0 is still in L1 when it is copied to dst1; an output aliasing an input
      // is safe because each input chunk is consumed before its outputs are written.
      ReduceKernel<T, Op>::run(at<T>(dst0, off), at<T>(a, off), at<T>(b, off), m);
      if (dst1 != dst0) std::memcpy(at<T>(dst1, off), at<T>(dst0, off), m * elemSize<T>());
    }
  }
};

/// acc[i] = op(acc[i], float(src[i])) for a float16/bfloat16 source.
template <typename T, typename Op>
void accumulateFrom(float* acc, const void* src, size_t n) {
  using E = typename T::Elem;
  size_t done = 0;
#if BRAID_KERNELS_HALF_SIMD
  if constexpr (std::is_same_v<T, HalfCodec>) done = detail::halfAccumulateBlocks<Op>(acc, src, n);
#endif
  detail::accumulateFromLoop<E, Op>(
      acc + done, reinterpret_cast<const UA<uint16_t>*>(at<T>(src, done)), n - done);
}

template <typename T, typename Op>
struct ReduceManyKernel {
  static void run(void* dst, const void* const* srcs, int nsrc, size_t n) {
    if (nsrc == 1) {
      if (dst != srcs[0]) std::memcpy(dst, srcs[0], n * elemSize<T>());
      return;
    }
    if constexpr (kIsCodec<T>) {
      // Accumulate a block in float32 on the stack; dst is written only after every source of
      // that block has been read, so any aliasing of dst and a source is safe.
      alignas(64) float acc[kStageElems];
      for (size_t off = 0; off < n; off += kStageElems) {
        const size_t m = std::min(kStageElems, n - off);
        T::toFloat(acc, at<T>(srcs[0], off), m);
        for (int k = 1; k < nsrc; ++k) accumulateFrom<T, Op>(acc, at<T>(srcs[k], off), m);
        T::fromFloat(at<T>(dst, off), acc, m);
      }
    } else {
      using E = Plain<T>;
      // dst may be srcs[0]; if it is also a later source (outside the contract, but cheap to
      // honour) accumulate each chunk on the stack so no source is overwritten before it is read.
      bool aliasLater = false;
      for (int k = 1; k < nsrc; ++k) aliasLater |= (srcs[k] == dst);
      constexpr size_t kChunk = kChunkBytes / sizeof(T);
      alignas(64) T tmp[kChunk];
      for (size_t off = 0; off < n; off += kChunk) {
        const size_t m = std::min(kChunk, n - off);
        void* acc = aliasLater ? static_cast<void*>(tmp) : at<T>(dst, off);
        detail::reduceAliased<E, Op>(acc, at<T>(srcs[0], off), at<T>(srcs[1], off), m);
        auto* d = static_cast<UA<T>*>(acc);
        auto src = [&](int k) { return reinterpret_cast<const UA<T>*>(at<T>(srcs[k], off)); };
        int k = 2;
        // Two sources per pass halve the accumulator's L1 traffic; the order stays left to right.
        for (; k + 1 < nsrc; k += 2) detail::accumulate2Loop<E, Op>(d, src(k), src(k + 1), m);
        if (k < nsrc) detail::accumulateLoop<E, Op>(d, src(k), m);
        if (aliasLater) std::memcpy(at<T>(dst, off), tmp, m * sizeof(T));
      }
    }
  }
};

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op) {
  detail::checkArgs("reduce", type, op);
  if (count == 0) return;
  detail::dispatch<ReduceKernel>("reduce", type, op, dst, a, b, count);
}

void reduceCopy(void* dst0, void* dst1, const void* a, const void* b, size_t count, DataType type,
                RedOp op) {
  detail::checkArgs("reduceCopy", type, op);
  if (count == 0) return;
  detail::dispatch<ReduceCopyKernel>("reduceCopy", type, op, dst0, dst1, a, b, count);
}

void reduceMany(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                RedOp op) {
  detail::checkArgs("reduceMany", type, op);
  if (nsrc < 1) detail::badArgument("reduceMany", "nsrc " + std::to_string(nsrc) + " < 1");
  if (count == 0) return;
  detail::dispatch<ReduceManyKernel>("reduceMany", type, op, dst, srcs, nsrc, count);
}

}  // namespace braid::kernels
