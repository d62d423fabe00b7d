#include "trainer/cuda/context.h"

#include <algorithm>

#include "trainer/cuda/cuda_check.h"

namespace braid::trainer::cuda {

void* deviceAlloc(size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  BRAID_CUDA_CHECK(cudaMalloc(&p, bytes), "{}: {} bytes", what, bytes);
  return p;
}

void deviceFree(void* p) noexcept {
  if (p == nullptr) return;
  cudaDeviceSynchronize();
  cudaFree(p);
}

int usableGpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

CudaContext::CudaContext(const ContextOptions& options) : options_(options) {
  const int gpus = usableGpuCount();
  BRAID_ENFORCE(options.device >= 0 && options.device < gpus, ErrorCode::kCudaError,
                "--device cuda: no CUDA device {} ({} usable here)", options.device, gpus);
  BRAID_CUDA_CHECK(cudaSetDevice(options.device), "device {}", options.device);
  BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "device {}",
                   options.device);
  BRAID_CUBLAS_CHECK(cublasCreate(&cublas_), "device {}", options.device);
  BRAID_CUBLAS_CHECK(cublasSetStream(cublas_, stream_), "device {}", options.device);
  // Plain float32 GEMMs (cuBLAS's default math uses no TF32 for sgemm), as PyTorch's default
  // torch.backends.cuda.matmul.allow_tf32 = False.
  BRAID_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "device {}", options.device);
  BRAID_CUDNN_CHECK(cudnnCreate(&cudnn_), "device {}", options.device);
  BRAID_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_), "device {}", options.device);
}

CudaContext::~CudaContext() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaContext::workspace(size_t bytes) {
  workspace_.resize(std::max(bytes, workspace_.size()), "cuDNN workspace");
  return workspace_.data();
}

void CudaContext::synchronize() const {
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream_), "device {}", options_.device);
}

void copyToDevice(float* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  BRAID_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream),
                   "{} floats to the device", n);
}

void copyToHost(float* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  BRAID_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream),
                   "{} floats to the host", n);
}

}  // namespace braid::trainer::cuda
