#include "trainer/nn/sequential.h"

#include "common/error.h"

namespace braid::trainer {

void Sequential::add(std::unique_ptr<Layer> layer) {
  BRAID_ENFORCE(layer != nullptr, ErrorCode::kInvalidUsage, "Sequential: null layer");
  if (paramBegin_ == kNoParams) paramBegin_ = layer->paramBegin();
  layer->setTraining(training_);
  layers_.push_back(std::move(layer));
}

const Tensor& Sequential::forward(const Tensor& x) {
  BRAID_ENFORCE(!layers_.empty(), ErrorCode::kInvalidUsage, "Sequential: forward with no layers");
  const Tensor* cur = &x;
  for (auto& layer : layers_) cur = &layer->forward(*cur);
  return *cur;
}

const Tensor& Sequential::backward(const Tensor& dy) {
  BRAID_ENFORCE(!layers_.empty(), ErrorCode::kInvalidUsage, "Sequential: backward with no layers");
  const Tensor* cur = &dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    cur = &layers_[i]->backward(*cur);
    if (hook_ && layers_[i]->paramBegin() != kNoParams) hook_(layers_[i]->paramBegin());
  }
  return *cur;
}

void Sequential::setTraining(bool training) {
  training_ = training;
  for (auto& layer : layers_) layer->setTraining(training);
}

std::string Sequential::describe() const {
  std::string s = "Sequential(";
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i) s += ", ";
    s += layers_[i]->describe();
  }
  return s + ")";
}

double Sequential::flopsPerSample() const {
  double sum = 0.0;
  for (const auto& layer : layers_) sum += layer->flopsPerSample();
  return sum;
}

}  // namespace braid::trainer
