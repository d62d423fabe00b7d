// Linear on the device: cuBLAS sgemm over nn's row-major layout (weight [out, in]).
#pragma once

#include "trainer/cuda/device_layer.h"

namespace braid::trainer::cuda {

class DeviceLinear : public DeviceLayer {
 public:
  DeviceLinear(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat);
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;

 private:
  CudaContext& ctx_;
  int in_, out_;
  const float* weight_;
  const float* bias_;
  float* dweight_;
  float* dbias_;
  const DeviceTensor* x_ = nullptr;
  DeviceTensor y_, dx_;
};

}  // namespace braid::trainer::cuda
