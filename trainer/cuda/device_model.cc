#include "trainer/cuda/device_model.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/device_batch_norm.h"
#include "trainer/cuda/device_conv2d.h"
#include "trainer/cuda/device_linear.h"
#include "trainer/cuda/device_residual.h"
#include "trainer/cuda/device_shape_layers.h"
#include "trainer/cuda/half_kernels.h"

namespace braid::trainer::cuda {

std::unique_ptr<DeviceLayer> makeDeviceLayer(const LayerPlan& plan, CudaContext& ctx,
                                             const FlatBuffers& flat) {
  switch (plan.kind) {
    case LayerKind::kFlatten:
      return std::make_unique<DeviceFlatten>(ctx);
    case LayerKind::kLinear:
      return std::make_unique<DeviceLinear>(plan, ctx, flat);
    case LayerKind::kRelu:
      return std::make_unique<DeviceRelu>(ctx);
    case LayerKind::kConv2d:
      return std::make_unique<DeviceConv2d>(plan, ctx, flat);
    case LayerKind::kBatchNorm2d:
      return std::make_unique<DeviceBatchNorm2d>(plan, ctx, flat);
    case LayerKind::kGlobalAvgPool:
      return std::make_unique<DeviceGlobalAvgPool>(ctx);
    case LayerKind::kResidual:
      return std::make_unique<DeviceResidualBlock>(plan, ctx, flat);
  }
  fail(ErrorCode::kInternal, "no device layer for kind {}", static_cast<int>(plan.kind));
}

DeviceModel::DeviceModel(const Model& model, CudaContext& ctx)
    : ctx_(ctx),
      plan_(planModel(model)),
      params_(model.store.numParams(), "parameters"),
      grads_(model.store.numParams(), "gradients"),
      buffers_(model.store.numBuffers(), "buffers") {
  if (ctx.options().halfCompute) halfParams_.resize(params_.size(), "half parameters");
  const FlatBuffers flat{params_.data(), grads_.data(), buffers_.data(), halfParams_.data()};
  for (const LayerPlan& p : plan_) layers_.push_back(makeDeviceLayer(p, ctx, flat));
  paramsFromHost(model.store);
  buffersFromHost(model.store);
  zeroGrads();
  ctx_.synchronize();
}

const DeviceTensor& DeviceModel::forward(const DeviceTensor& x) {
  // fp16: the layers read the half copy of the parameters as the optimizer left them.
  if (ctx_.options().halfCompute) {
    floatToHalf(params_.data(), halfParams_.data(), params_.size(), ctx_.stream());
  }
  const DeviceTensor* cur = &x;
  for (auto& l : layers_) cur = &l->forward(*cur);
  return *cur;
}

const DeviceTensor& DeviceModel::backward(const DeviceTensor& dy) {
  const DeviceTensor* cur = &dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    cur = &layers_[i]->backward(*cur);
    if (hook_ && layers_[i]->paramBegin() != Layer::kNoParams) hook_(layers_[i]->paramBegin());
  }
  return *cur;
}

void DeviceModel::setTraining(bool training) {
  for (auto& l : layers_) l->setTraining(training);
}

void DeviceModel::zeroGrads() {
  if (grads_.size() == 0) return;
  BRAID_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.size() * sizeof(float), ctx_.stream()),
                   "{} gradients", grads_.size());
}

void DeviceModel::paramsToHost(ParamStore& store) {
  copyToHost(store.params(), params_.data(), params_.size(), ctx_.stream());
  ctx_.synchronize();
}

void DeviceModel::gradsToHost(ParamStore& store) {
  copyToHost(store.grads(), grads_.data(), grads_.size(), ctx_.stream());
  ctx_.synchronize();
}

void DeviceModel::buffersToHost(ParamStore& store) {
  copyToHost(store.buffers(), buffers_.data(), buffers_.size(), ctx_.stream());
  ctx_.synchronize();
}

void DeviceModel::paramsFromHost(const ParamStore& store) {
  copyToDevice(params_.data(), store.params(), params_.size(), ctx_.stream());
}

void DeviceModel::buffersFromHost(const ParamStore& store) {
  copyToDevice(buffers_.data(), store.buffers(), buffers_.size(), ctx_.stream());
}

}  // namespace braid::trainer::cuda
