// Linear on the device: cuBLAS sgemm over nn's row-major layout (weight [out, in]); in fp16
// cublasGemmEx on half copies of x, dy and the weight, accumulating and writing float32.
#pragma once

#include "trainer/cuda/device_layer.h"

namespace braid::trainer::cuda {

class DeviceLinear : public DeviceLayer {
 public:
  DeviceLinear(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat);
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;

 private:
  const DeviceTensor& backwardHalf(const DeviceTensor& dy);

  CudaContext& ctx_;
  int in_, out_;
  const float* weight_;
  const float* bias_;
  float* dweight_;
  float* dbias_;
  const __half* halfWeight_ = nullptr;  // fp16 only
  const DeviceTensor* x_ = nullptr;
  DeviceTensor y_, dx_;
  DeviceBuffer<__half> halfX_, halfDy_;  // fp16: the GEMM operands (x kept for backward)
};

}  // namespace braid::trainer::cuda
