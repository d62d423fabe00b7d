// ResidualBlock on the device: nn's block (conv1, bn1, relu, conv2, bn2, shortcut, add, relu)
// out of the device layers.
#pragma once

#include <memory>
#include <vector>

#include "trainer/cuda/device_layer.h"
#include "trainer/cuda/device_shape_layers.h"

namespace braid::trainer::cuda {

class DeviceResidualBlock : public DeviceLayer {
 public:
  DeviceResidualBlock(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat);
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;
  void setTraining(bool training) override;

 private:
  CudaContext& ctx_;
  std::vector<std::unique_ptr<DeviceLayer>> main_;      // conv1, bn1, relu, conv2, bn2
  std::vector<std::unique_ptr<DeviceLayer>> shortcut_;  // proj conv, proj bn; empty: identity
  DeviceRelu reluOut_;
  DeviceTensor sum_, dx_;
};

}  // namespace braid::trainer::cuda
