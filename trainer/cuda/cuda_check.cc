#include "trainer/cuda/cuda_check.h"

#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

void failCuda(const char* call, cudaError_t status, const std::string& what) {
  fail(ErrorCode::kCudaError, "{} ({}): {} ({})", call, what, cudaGetErrorString(status),
       cudaGetErrorName(status));
}

void failCublas(const char* call, cublasStatus_t status, const std::string& what) {
  fail(ErrorCode::kCudaError, "{} ({}): {} ({})", call, what, cublasGetStatusString(status),
       static_cast<int>(status));
}

void failCudnn(const char* call, cudnnStatus_t status, const std::string& what) {
  fail(ErrorCode::kCudaError, "{} ({}): {} ({})", call, what, cudnnGetErrorString(status),
       static_cast<int>(status));
}

void checkLaunch(const char* kernel, size_t elements) {
  BRAID_CUDA_CHECK(cudaGetLastError(), "launch of kernel {} over {} elements", kernel, elements);
}

}  // namespace braid::trainer::cuda
