// memory.h with CUDA: the runtime's view of a pointer. The runtime is linked statically into
// libnccl.so.2, as NCCL's is; it shares the driver's current context with the program's.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "common/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "memory.h"

namespace braid::nccl {

bool isDeviceMemory(const void* ptr) {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver, no device, or an unknown pointer: host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

int currentDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

void* allocateBuffer(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorCode::kCudaError, "ncclMemAlloc of {} bytes: cudaMalloc failed: {}", bytes,
         cudaGetErrorString(err));
  }
  return ptr;
}

void freeBuffer(void* ptr) {
  const cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorCode::kCudaError, "ncclMemFree({}): cudaFree failed: {}", ptr,
         cudaGetErrorString(err));
  }
}

void* scaledOnStream(const void* src, size_t count, DataType type, double scalar,
                     const void* scalarAt, void* stream) {
  const size_t bytes = count * dataTypeSize(type);
  auto s = static_cast<cudaStream_t>(stream);
  void* out = nullptr;
  cudaError_t err = cudaMallocAsync(&out, bytes == 0 ? 1 : bytes, s);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorCode::kCudaError, "PreMulSum: cudaMallocAsync of {} bytes for the scaled input: {}",
         bytes, cudaGetErrorString(err));
  }
  const int launched = kernels::cuda::scaleAsync(out, src, count, type, scalar, scalarAt, stream);
  if (launched != 0) {
    cudaFreeAsync(out, s);
    (void)cudaGetLastError();
    fail(ErrorCode::kCudaError, "PreMulSum: scaling {} elements of {}: {}", count,
         dataTypeName(type), kernels::cuda::errorString(launched));
  }
  return out;
}

void freeOnStream(void* ptr, void* stream) {
  if (ptr != nullptr) cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
}

void copyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  const cudaError_t err =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorCode::kCudaError, "a copy of {} bytes to this rank itself: cudaMemcpyAsync failed: {}",
         bytes, cudaGetErrorString(err));
  }
}

}  // namespace braid::nccl
