// The device layer interface: nn's Layer on DeviceTensors, parameters and gradients in the
// device model's flat buffers at the CPU ParamStore's offsets.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <memory>

#include "trainer/cuda/context.h"
#include "trainer/cuda/device_tensor.h"
#include "trainer/cuda/layer_plan.h"

namespace braid::trainer::cuda {

/// The device model's flat buffers (device pointers), laid out as the CPU ParamStore's.
struct FlatBuffers {
  float* params = nullptr;
  float* grads = nullptr;
  float* buffers = nullptr;
  /// fp16: the half copy of `params` (same offsets) the GEMMs and convolutions read; refreshed
  /// by DeviceModel before each forward. nullptr in fp32.
  const __half* halfParams = nullptr;
};

/// As nn's Layer: forward() keeps what backward() needs (the input must stay alive and unchanged
/// until then); backward() returns dL/dx and ADDS the parameter gradients. Everything is enqueued
/// on the context's stream; nothing blocks.
class DeviceLayer {
 public:
  virtual ~DeviceLayer() = default;
  virtual const DeviceTensor& forward(const DeviceTensor& x) = 0;
  virtual const DeviceTensor& backward(const DeviceTensor& dy) = 0;
  virtual void setTraining(bool training) { training_ = training; }
  size_t paramBegin() const { return paramBegin_; }

 protected:
  bool training_ = true;
  size_t paramBegin_ = Layer::kNoParams;
};

/// The device layer for one plan entry.
std::unique_ptr<DeviceLayer> makeDeviceLayer(const LayerPlan& plan, CudaContext& ctx,
                                             const FlatBuffers& flat);

}  // namespace braid::trainer::cuda
