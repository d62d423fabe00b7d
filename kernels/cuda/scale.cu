// scaleAsync: dst[i] = src[i] * scalar, the scaling of the NCCL API's PreMulSum before its sum,
// with scaleElem (kernels/element_ops.h) as the CPU's kernels::scale: bit for bit the same.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_elem.cuh"

namespace braid::kernels::cuda {
namespace detail {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scaleKernel(typename Traits<T>::S* dst, const typename Traits<T>::S* src, size_t count,
                double scalar, const typename Traits<T>::S* scalarAt) {
  using Tr = Traits<T>;
  // A scalar in device memory is read when the kernel runs (ncclScalarDevice).
  const double k = scalarAt != nullptr ? static_cast<double>(Tr::load(*scalarAt)) : scalar;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += stride) {
    dst[i] = Tr::store(scaleElem(Tr::load(src[i]), k));
  }
}

struct Scale {
  template <typename T, typename Op>
  static int run(void* dst, const void* src, size_t count, double scalar, const void* scalarAt,
                 cudaStream_t stream) {
    using S = typename Traits<T>::S;
    if constexpr (std::is_same_v<Op, SumOp>) {  // the op is irrelevant: one instance per type
      scaleKernel<T><<<blocksFor(count, 4), kThreads, 0, stream>>>(
          static_cast<S*>(dst), static_cast<const S*>(src), count, scalar,
          static_cast<const S*>(scalarAt));
      return static_cast<int>(cudaGetLastError());
    }
    return static_cast<int>(cudaErrorInvalidValue);
  }
};

struct LoadScale {
  template <typename T, typename Op>
  static int run() {
    cudaFuncAttributes attr;
    return static_cast<int>(cudaFuncGetAttributes(&attr, scaleKernel<T>));
  }
};

}  // namespace

int loadScaleKernels() {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const int err = dispatch<LoadScale>("loadAllKernels", DataType(t), RedOp::kSum);
    if (err != 0) return err;
  }
  return 0;
}

}  // namespace detail

int scaleAsync(void* dst, const void* src, size_t count, DataType type, double scalar,
               const void* scalarAt, void* stream) {
  if (count == 0) return 0;
  return detail::dispatch<detail::Scale>("scaleAsync", type, RedOp::kSum, dst, src, count, scalar,
                                         scalarAt, static_cast<cudaStream_t>(stream));
}

}  // namespace braid::kernels::cuda
