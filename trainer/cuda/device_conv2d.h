// Conv2d on the device: cuDNN forward, backward-data and backward-filter, with algorithms found
// once per input shape (cudnnFind*, the fastest that succeeds) and the context's workspace. In
// fp16 the convolutions run on half copies of x, dy and the weight (float32 compute type).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "trainer/cuda/device_layer.h"

namespace braid::trainer::cuda {

class DeviceConv2d : public DeviceLayer {
 public:
  DeviceConv2d(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat);
  ~DeviceConv2d() override;
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;

 private:
  struct Plan;  // descriptors and algorithms for one input shape (device_conv2d.cc)
  CudaContext& ctx_;
  LayerPlan plan_;
  const float* weight_;
  float* dweight_;
  const float* bias_ = nullptr;
  float* dbias_ = nullptr;
  std::map<std::vector<int>, std::unique_ptr<Plan>> plans_;
  Plan* current_ = nullptr;
  const DeviceTensor* x_ = nullptr;
  DeviceTensor y_, dx_;
  const __half* halfWeight_ = nullptr;  // fp16 only
  DeviceBuffer<__half> halfX_, halfY_, halfDy_, halfDx_, halfDw_;

  Plan& planFor(const std::vector<int>& inputShape);
  void forwardHalf(Plan& p, const DeviceTensor& x);
  const DeviceTensor& backwardHalf(Plan& p, const DeviceTensor& dy);
};

}  // namespace braid::trainer::cuda
