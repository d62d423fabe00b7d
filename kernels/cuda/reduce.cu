// reduceCopyAsync, divideAsync and copyAsync: one kernel per call, each running its loop of
// element_loops.cuh over the whole grid.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_loops.cuh"

namespace braid::kernels::cuda {
namespace detail {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduceCopyKernel(typename Traits<T>::S* dst0, typename Traits<T>::S* dst1,
                     const typename Traits<T>::S* a, const typename Traits<T>::S* b, size_t count,
                     uint64_t divisor, bool vectorOk) {
  reduceCopyLoop<T, Op, ReadOnlyLoads>(dst0, dst1, a, b, count, divisor, vectorOk,
                                       blockIdx.x * size_t(blockDim.x) + threadIdx.x,
                                       size_t(gridDim.x) * blockDim.x);
}

struct ReduceCopy {
  template <typename T, typename Op>
  static int run(void* dst0, void* dst1, const void* a, const void* b, size_t count,
                 uint64_t divisor, cudaStream_t stream) {
    using S = typename Traits<T>::S;
    const bool vectorOk = aligned16(dst0) && aligned16(dst1) && aligned16(a) && aligned16(b);
    const size_t items = vectorOk ? count / Vec<S>::kN + 1 : count;
    reduceCopyKernel<T, Op><<<blocksFor(items, vectorOk ? kUnroll : 1), kThreads, 0, stream>>>(
        static_cast<S*>(dst0), static_cast<S*>(dst1), static_cast<const S*>(a),
        static_cast<const S*>(b), count, divisor, vectorOk);
    return static_cast<int>(cudaGetLastError());
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    divideKernel(typename Traits<T>::S* dst, const typename Traits<T>::S* src, size_t count,
                 uint64_t divisor) {
  divideLoop<T, ReadOnlyLoads>(dst, src, count, divisor,
                               blockIdx.x * size_t(blockDim.x) + threadIdx.x,
                               size_t(gridDim.x) * blockDim.x);
}

struct Divide {
  template <typename T, typename Op>
  static int run(void* dst, const void* src, size_t count, uint64_t divisor, cudaStream_t stream) {
    using S = typename Traits<T>::S;
    if constexpr (std::is_same_v<Op, SumOp>) {  // the op is irrelevant: one instance per type
      divideKernel<T><<<blocksFor(count, 4), kThreads, 0, stream>>>(
          static_cast<S*>(dst), static_cast<const S*>(src), count, divisor);
      return static_cast<int>(cudaGetLastError());
    }
    return static_cast<int>(cudaErrorInvalidValue);
  }
};

__global__ void __launch_bounds__(kThreads)
    copy2Kernel(char* dst0, char* dst1, const char* src, size_t bytes, bool vectorOk) {
  copyLoop<ReadOnlyLoads>(dst0, dst1, src, bytes, vectorOk,
                          blockIdx.x * size_t(blockDim.x) + threadIdx.x,
                          size_t(gridDim.x) * blockDim.x);
}

// Loads (cudaFuncGetAttributes forces a lazy load) each kernel of this file for <T, Op>.
struct LoadTwoInput {
  template <typename T, typename Op>
  static int run() {
    cudaFuncAttributes attr;
    cudaError_t err = cudaFuncGetAttributes(&attr, reduceCopyKernel<T, Op>);
    if (err == cudaSuccess && std::is_same_v<Op, SumOp>) {
      err = cudaFuncGetAttributes(&attr, divideKernel<T>);
    }
    return static_cast<int>(err);
  }
};

}  // namespace

int loadTwoInputKernels() {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumRedOps; ++o) {
      const int err = dispatch<LoadTwoInput>("loadAllKernels", DataType(t), RedOp(o));
      if (err != 0) return err;
    }
  }
  cudaFuncAttributes attr;
  return static_cast<int>(cudaFuncGetAttributes(&attr, copy2Kernel));
}

}  // namespace detail

int loadAllKernels() {
  int err = detail::loadTwoInputKernels();
  if (err == 0) err = detail::loadReduceManyKernels();
  return err != 0 ? err : detail::loadScaleKernels();
}

int reduceCopyAsync(void* dst0, void* dst1, const void* a, const void* b, size_t count,
                    DataType type, RedOp op, uint64_t divisor, void* stream) {
  if (count == 0) return 0;
  return detail::dispatch<detail::ReduceCopy>("reduceCopyAsync", type, op, dst0, dst1, a, b, count,
                                              divisor, static_cast<cudaStream_t>(stream));
}

int divideAsync(void* dst, const void* src, size_t count, DataType type, uint64_t divisor,
                void* stream) {
  if (divisor == 0) detail::badArgument("divideAsync", "divisor 0");
  if (count == 0) return 0;
  return detail::dispatch<detail::Divide>("divideAsync", type, RedOp::kSum, dst, src, count,
                                          divisor, static_cast<cudaStream_t>(stream));
}

int copyAsync(void* dst0, void* dst1, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  // A kernel even for one destination, not cudaMemcpyAsync: the driver's memcpy takes a
  // context-wide lock that waits for threads inside synchronous CUDA calls, which the device
  // communicator's progress thread must never do (comm/device/host_words.h).
  if (dst1 == nullptr && dst0 == src) return 0;
  const bool vectorOk =
      detail::aligned16(dst0) && detail::aligned16(dst1) && detail::aligned16(src);
  const size_t items = vectorOk ? bytes / 16 + 1 : bytes;
  detail::copy2Kernel<<<detail::blocksFor(items, vectorOk ? detail::kUnroll : 1), detail::kThreads,
                        0, s>>>(static_cast<char*>(dst0), static_cast<char*>(dst1),
                                static_cast<const char*>(src), bytes, vectorOk);
  return static_cast<int>(cudaGetLastError());
}

const char* errorString(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

}  // namespace braid::kernels::cuda
