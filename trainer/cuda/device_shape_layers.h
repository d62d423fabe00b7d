// The device layers without parameters: ReLU, Flatten, GlobalAvgPool.
#pragma once

#include <vector>

#include "trainer/cuda/device_layer.h"

namespace braid::trainer::cuda {

/// What the layers without parameters keep: the context, the input shape, y and dx.
class ShapeLayer : public DeviceLayer {
 protected:
  explicit ShapeLayer(CudaContext& ctx) : ctx_(ctx) {}
  CudaContext& ctx_;
  std::vector<int> inShape_;
  DeviceTensor y_, dx_;
};

class DeviceRelu : public ShapeLayer {
 public:
  explicit DeviceRelu(CudaContext& ctx) : ShapeLayer(ctx) {}
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;
};

/// [N, ...] -> [N, prod(...)] (a device copy, as nn's Flatten copies).
class DeviceFlatten : public ShapeLayer {
 public:
  explicit DeviceFlatten(CudaContext& ctx) : ShapeLayer(ctx) {}
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;
};

/// [N, C, H, W] -> [N, C].
class DeviceGlobalAvgPool : public ShapeLayer {
 public:
  explicit DeviceGlobalAvgPool(CudaContext& ctx) : ShapeLayer(ctx) {}
  const DeviceTensor& forward(const DeviceTensor& x) override;
  const DeviceTensor& backward(const DeviceTensor& dy) override;
};

/// dst = src on ctx's stream (device to device), dst resized to src's shape.
void copyTensor(const DeviceTensor& src, DeviceTensor& dst, const std::vector<int>& shape,
                const CudaContext& ctx);

}  // namespace braid::trainer::cuda
