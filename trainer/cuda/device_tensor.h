// A float32 tensor in device memory (NCHW or N x features), the device twin of nn's Tensor.
#pragma once

#include <cstddef>
#include <vector>

#include "trainer/cuda/context.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/nn/tensor.h"

namespace braid::trainer::cuda {

struct DeviceTensor {
  std::vector<int> shape;
  DeviceBuffer<float> storage;

  /// Sets the shape, growing the storage if needed; with ctx.options().poisonOutputs the
  /// elements are NaN until written.
  void resize(const std::vector<int>& dims, const CudaContext& ctx);
  size_t numel() const { return storage.size(); }
  int dim(size_t i) const { return shape.at(i); }
  size_t perSample() const { return shape.empty() || shape[0] == 0 ? 0 : numel() / shape[0]; }
  float* ptr() { return storage.data(); }
  const float* ptr() const { return storage.data(); }
};

/// Copies a host tensor to the device on ctx's stream (shape included).
void upload(const Tensor& host, DeviceTensor& device, const CudaContext& ctx);
/// Copies a device tensor to the host and waits for it.
Tensor download(const DeviceTensor& device, const CudaContext& ctx);

}  // namespace braid::trainer::cuda
