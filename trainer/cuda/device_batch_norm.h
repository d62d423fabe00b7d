// BatchNorm2d on the device: the kernels of kernels.h, running statistics in the flat buffers.
#pragma once

#include "trainer/cuda/device_layer.h"

namespace braid::trainer::cuda {

class DeviceBatchNorm2d : public DeviceLayer {
 public:
  DeviceBatchNorm2d(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat);
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;

 private:
  CudaContext& ctx_;
  int c_;
  float momentum_, eps_;
  const float* gamma_;
  const float* beta_;
  float* dgamma_;
  float* dbeta_;
  float* runningMean_;
  float* runningVar_;
  bool forwardWasTraining_ = true;
  DeviceBuffer<float> invStd_;
  DeviceBuffer<double> scratch_;  // the kernels' per-slice partial sums
  DeviceTensor xhat_, y_, dx_;
};

}  // namespace braid::trainer::cuda
