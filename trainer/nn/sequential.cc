#include "trainer/nn/sequential.h"

#include "common/error.h"

namespace braid::trainer {

void Sequential::add(std::unique_ptr<Layer> layer) {
  BRAID_ENFORCE(layer != nullptr, ErrorCode::kInvalidUsage, "Sequential: null layer");
  if (paramBegin_ == kNoParams) paramBegin_ = layer->paramBegin();
  layer->setTraining(training_);
  layers_.push_back(std::move(layer));
}

const Tensor& Sequential::forward(const Tensor& x) { return forwardRange(0, layers_.size(), x); }

const Tensor& Sequential::backward(const Tensor& dy) {
  return backwardRange(0, layers_.size(), dy);
}

const Tensor& Sequential::forwardRange(size_t first, size_t last, const Tensor& x) {
  BRAID_ENFORCE(first < last && last <= layers_.size(), ErrorCode::kInvalidUsage,
                "Sequential: forward over layers [{}, {}) of {}", first, last, layers_.size());
  const Tensor* cur = &x;
  for (size_t i = first; i < last; ++i) cur = &layers_[i]->forward(*cur);
  return *cur;
}

const Tensor& Sequential::backwardRange(size_t first, size_t last, const Tensor& dy) {
  BRAID_ENFORCE(first < last && last <= layers_.size(), ErrorCode::kInvalidUsage,
                "Sequential: backward over layers [{}, {}) of {}", first, last, layers_.size());
  const Tensor* cur = &dy;
  for (size_t i = last; i-- > first;) {
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
