// A CPU Model mirrored on the device: its plan's layers over one flat device buffer each for
// parameters, gradients and buffers, at the ParamStore's offsets, so values copy both ways
// unchanged (checkpoints, --dump-params and the layer checks use the host store). In fp16
// (ContextOptions::halfCompute) forward() first refreshes a flat half copy of the parameters,
// which Linear and Conv2d read; the float32 parameters stay the master copy.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "trainer/cuda/device_layer.h"
#include "trainer/nn/models.h"

namespace braid::trainer::cuda {

class DeviceModel {
 public:
  /// Plans `model` (planModel), builds the device layers and copies its parameters and buffers
  /// over. Gradients start at zero.
  DeviceModel(const Model& model, CudaContext& ctx);

  /// As Sequential: the top-level layers in order; backward in reverse, calling the grad-ready
  /// hook after each layer with parameters with its first offset (every gradient at or above it
  /// has been enqueued).
  const DeviceTensor& forward(const DeviceTensor& x);
  const DeviceTensor& backward(const DeviceTensor& dy);
  void setTraining(bool training);
  void setGradReadyHook(std::function<void(size_t readyFrom)> hook) { hook_ = std::move(hook); }

  void zeroGrads();
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  float* buffers() { return buffers_.data(); }
  size_t numParams() const { return params_.size(); }
  size_t numBuffers() const { return buffers_.size(); }
  const std::vector<LayerPlan>& plan() const { return plan_; }
  CudaContext& context() { return ctx_; }

  /// Host <-> device copies of the flat buffers (the to-host ones wait for the stream).
  void paramsToHost(ParamStore& store);
  void gradsToHost(ParamStore& store);
  void buffersToHost(ParamStore& store);
  void paramsFromHost(const ParamStore& store);
  void buffersFromHost(const ParamStore& store);

 private:
  CudaContext& ctx_;
  std::vector<LayerPlan> plan_;
  DeviceBuffer<float> params_, grads_, buffers_;
  DeviceBuffer<__half> halfParams_;  // fp16 only
  std::vector<std::unique_ptr<DeviceLayer>> layers_;
  std::function<void(size_t)> hook_;
};

}  // namespace braid::trainer::cuda
