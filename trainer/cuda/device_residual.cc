#include "trainer/cuda/device_residual.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

DeviceResidualBlock::DeviceResidualBlock(const LayerPlan& plan, CudaContext& ctx,
                                         const FlatBuffers& flat)
    : ctx_(ctx), reluOut_(ctx) {
  const auto& c = plan.children;
  BRAID_ENFORCE(c.size() == 4 || c.size() == 6, ErrorCode::kInternal,
                "device ResidualBlock: plan with {} children", c.size());
  paramBegin_ = plan.paramBegin;
  main_.push_back(makeDeviceLayer(c[0], ctx, flat));
  main_.push_back(makeDeviceLayer(c[1], ctx, flat));
  main_.push_back(std::make_unique<DeviceRelu>(ctx));
  main_.push_back(makeDeviceLayer(c[2], ctx, flat));
  main_.push_back(makeDeviceLayer(c[3], ctx, flat));
  if (c.size() == 6) {
    shortcut_.push_back(makeDeviceLayer(c[4], ctx, flat));
    shortcut_.push_back(makeDeviceLayer(c[5], ctx, flat));
  }
}

const DeviceTensor& DeviceResidualBlock::forward(const DeviceTensor& x) {
  const DeviceTensor* a = &x;
  for (auto& l : main_) a = &l->forward(*a);
  const DeviceTensor* s = &x;
  for (auto& l : shortcut_) s = &l->forward(*s);
  BRAID_ENFORCE(a->shape == s->shape, ErrorCode::kInvalidUsage,
                "device ResidualBlock: main path {} and shortcut {} differ", shapeString(a->shape),
                shapeString(s->shape));
  sum_.resize(a->shape, ctx_);
  addTensors(a->ptr(), s->ptr(), sum_.ptr(), sum_.numel(), ctx_.stream());
  return reluOut_.forward(sum_);
}

const DeviceTensor& DeviceResidualBlock::backward(const DeviceTensor& dy) {
  const DeviceTensor& d = reluOut_.backward(dy);
  const DeviceTensor* dMain = &d;
  for (size_t i = main_.size(); i-- > 0;) dMain = &main_[i]->backward(*dMain);
  const DeviceTensor* dShort = &d;
  for (size_t i = shortcut_.size(); i-- > 0;) dShort = &shortcut_[i]->backward(*dShort);
  dx_.resize(dMain->shape, ctx_);
  addTensors(dMain->ptr(), dShort->ptr(), dx_.ptr(), dx_.numel(), ctx_.stream());
  return dx_;
}

void DeviceResidualBlock::setTraining(bool training) {
  training_ = training;
  for (auto& l : main_) l->setTraining(training);
  for (auto& l : shortcut_) l->setTraining(training);
  reluOut_.setTraining(training);
}

}  // namespace braid::trainer::cuda
