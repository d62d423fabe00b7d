// Status checks for every CUDA runtime, cuBLAS and cuDNN call of the device trainer: a failure
// throws braid::Error(kCudaError) naming the call, what it was doing (shapes, sizes) and the
// library's own message. The message is formatted only on failure.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <string>

#include "common/error.h"

namespace braid::trainer::cuda {

[[noreturn]] void failCuda(const char* call, cudaError_t status, const std::string& what);
[[noreturn]] void failCublas(const char* call, cublasStatus_t status, const std::string& what);
[[noreturn]] void failCudnn(const char* call, cudnnStatus_t status, const std::string& what);

}  // namespace braid::trainer::cuda

/// BRAID_CUDA_CHECK(cudaMalloc(&p, n), "{} bytes", n): throws on anything but cudaSuccess.
#define BRAID_CUDA_CHECK(call, ...)                                                     \
  do {                                                                                  \
    const cudaError_t braid_status_ = (call);                                           \
    if (braid_status_ != cudaSuccess) {                                                 \
      ::braid::trainer::cuda::failCuda(#call, braid_status_, fmt::format(__VA_ARGS__)); \
    }                                                                                   \
  } while (0)

#define BRAID_CUBLAS_CHECK(call, ...)                                                     \
  do {                                                                                    \
    const cublasStatus_t braid_status_ = (call);                                          \
    if (braid_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      ::braid::trainer::cuda::failCublas(#call, braid_status_, fmt::format(__VA_ARGS__)); \
    }                                                                                     \
  } while (0)

#define BRAID_CUDNN_CHECK(call, ...)                                                     \
  do {                                                                                   \
    const cudnnStatus_t braid_status_ = (call);                                          \
    if (braid_status_ != CUDNN_STATUS_SUCCESS) {                                         \
      ::braid::trainer::cuda::failCudnn(#call, braid_status_, fmt::format(__VA_ARGS__)); \
    }                                                                                    \
  } while (0)
