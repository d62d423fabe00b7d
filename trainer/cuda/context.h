// One rank's CUDA state: its device, its own non-default stream, the cuBLAS and cuDNN handles
// bound to that stream, and the convolution workspace. Every device layer of a rank runs on it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <vector>

#include "trainer/cuda/device_buffer.h"

namespace braid::trainer::cuda {

/// CUDA devices usable here; 0 without a driver or a device (never throws).
int usableGpuCount();

struct ContextOptions {
  int device = 0;
  /// Let cuDNN use TF32 tensor cores for float32 convolutions (braid-train --tf32; PyTorch's
  /// torch.backends.cudnn.allow_tf32). Off: true float32. cuBLAS GEMMs are float32 either way.
  bool tf32Convolutions = false;
  /// Fill every layer output with NaN before the layer writes it, so an element a kernel misses
  /// shows (the layer checks).
  bool poisonOutputs = false;
  /// --precision fp16: Linear and Conv2d multiply half copies of their operands (float32
  /// accumulation); everything else stays float32.
  bool halfCompute = false;
};

class CudaContext {
 public:
  /// Selects `options.device` for the calling thread and creates the stream and handles. Throws
  /// kCudaError (no device: the message says so).
  explicit CudaContext(const ContextOptions& options = {});
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const ContextOptions& options() const { return options_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  /// Scratch space for cuDNN of at least `bytes`, shared by the layers (used one at a time on
  /// the stream).
  void* workspace(size_t bytes);
  /// Blocks until the stream's work is done; throws what went wrong in it.
  void synchronize() const;

 private:
  ContextOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer<char> workspace_;
};

/// Host <-> device copies of floats on `stream` (the host side may be pageable).
void copyToDevice(float* dst, const float* src, size_t n, cudaStream_t stream);
void copyToHost(float* dst, const float* src, size_t n, cudaStream_t stream);

}  // namespace braid::trainer::cuda
