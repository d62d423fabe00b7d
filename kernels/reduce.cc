// reduce, reduceCopy and reduceMany: one (dtype, op) dispatch per call, then chunked element
// loops. float16/bfloat16 chunks are staged through float32 stack buffers and rounded once.
#include <cstring>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/loops.h"

namespace braid::kernels {
namespace {

using detail::kIsCodec;
using detail::kStageElems;
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
    if constexpr (kIsCodec<T>) {
      alignas(64) float fa[kStageElems];
      alignas(64) float fb[kStageElems];
      for (size_t off = 0; off < n; off += kStageElems) {
        const size_t m = std::min(kStageElems, n - off);
        T::toFloat(fa, at<T>(a, off), m);
        T::toFloat(fb, at<T>(b, off), m);
        detail::accumulateLoop<float, Op>(fa, fb, m);
        T::fromFloat(at<T>(dst, off), fa, m);
      }
    } else {
      detail::reduceAliased<T, Op>(dst, a, b, n);
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

template <typename T, typename Op>
struct ReduceManyKernel {
  static void run(void* dst, const void* const* srcs, int nsrc, size_t n) {
    if (nsrc == 1) {
      if (dst != srcs[0]) std::memcpy(dst, srcs[0], n * elemSize<T>());
      return;
    }
    if constexpr (kIsCodec<T>) {
      alignas(64) float acc[kStageElems];
      alignas(64) float tmp[kStageElems];
      for (size_t off = 0; off < n; off += kStageElems) {
        const size_t m = std::min(kStageElems, n - off);
        T::toFloat(acc, at<T>(srcs[0], off), m);
        for (int k = 1; k < nsrc; ++k) {
          T::toFloat(tmp, at<T>(srcs[k], off), m);
          detail::accumulateLoop<float, Op>(acc, tmp, m);
        }
        T::fromFloat(at<T>(dst, off), acc, m);
      }
    } else {
      // dst may be srcs[0]; if it is also a later source (outside the contract, but cheap to
      // honour) accumulate each chunk on the stack so no source is overwritten before it is read.
      bool aliasLater = false;
      for (int k = 1; k < nsrc; ++k) aliasLater |= (srcs[k] == dst);
      constexpr size_t kChunk = kChunkBytes / sizeof(T);
      alignas(64) T tmp[kChunk];
      for (size_t off = 0; off < n; off += kChunk) {
        const size_t m = std::min(kChunk, n - off);
        void* acc = aliasLater ? static_cast<void*>(tmp) : at<T>(dst, off);
        detail::reduceAliased<T, Op>(acc, at<T>(srcs[0], off), at<T>(srcs[1], off), m);
        for (int k = 2; k < nsrc; ++k) {
          detail::accumulateLoop<T, Op>(static_cast<UA<T>*>(acc),
                                        reinterpret_cast<const UA<T>*>(at<T>(srcs[k], off)), m);
        }
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
  if (nsrc < 1) detail::badArgument("reduceMany", "nsrc " + std::to_string(nsrc) + " < 1");
  detail::checkArgs("reduceMany", type, op);
  if (count == 0) return;
  detail::dispatch<ReduceManyKernel>("reduceMany", type, op, dst, srcs, nsrc, count);
}

}  // namespace braid::kernels
