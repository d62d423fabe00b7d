#include "trainer/nn/residual.h"

#include <fmt/format.h>

#include "common/error.h"

namespace braid::trainer {

ResidualBlock::ResidualBlock(ParamStore& store, const std::string& name, int in, int out,
                             int stride)
    : in_(in),
      out_(out),
      stride_(stride),
      conv1_(store, name + ".conv1", in, out, 3, stride, 1, false),
      bn1_(store, name + ".bn1", out),
      conv2_(store, name + ".conv2", out, out, 3, 1, 1, false),
      bn2_(store, name + ".bn2", out) {
  paramBegin_ = conv1_.paramBegin();
  if (in != out || stride != 1) {
    projConv_ = std::make_unique<Conv2d>(store, name + ".proj.conv", in, out, 1, stride, 0, false);
    projBn_ = std::make_unique<BatchNorm2d>(store, name + ".proj.bn", out);
  }
}

const Tensor& ResidualBlock::forward(const Tensor& x) {
  const Tensor& a = bn2_.forward(conv2_.forward(relu1_.forward(bn1_.forward(conv1_.forward(x)))));
  const Tensor& s = projConv_ ? projBn_->forward(projConv_->forward(x)) : x;
  BRAID_ENFORCE(a.shape == s.shape, ErrorCode::kInvalidUsage,
                "{}: main path {} and shortcut {} differ", describe(), shapeString(a.shape),
                shapeString(s.shape));
  sum_.resize(a.shape);
  for (size_t i = 0; i < a.numel(); ++i) sum_.data[i] = a.data[i] + s.data[i];
  return reluOut_.forward(sum_);
}

const Tensor& ResidualBlock::backward(const Tensor& dy) {
  const Tensor& d = reluOut_.backward(dy);
  const Tensor& dMain =
      conv1_.backward(bn1_.backward(relu1_.backward(conv2_.backward(bn2_.backward(d)))));
  dx_.resize(dMain.shape);
  if (projConv_) {
    const Tensor& dShort = projConv_->backward(projBn_->backward(d));
    for (size_t i = 0; i < dx_.numel(); ++i) dx_.data[i] = dMain.data[i] + dShort.data[i];
  } else {
    for (size_t i = 0; i < dx_.numel(); ++i) dx_.data[i] = dMain.data[i] + d.data[i];
  }
  return dx_;
}

void ResidualBlock::setTraining(bool training) {
  training_ = training;
  for (Layer* l : {static_cast<Layer*>(&conv1_), static_cast<Layer*>(&bn1_),
                   static_cast<Layer*>(&conv2_), static_cast<Layer*>(&bn2_)}) {
    l->setTraining(training);
  }
  if (projConv_) {
    projConv_->setTraining(training);
    projBn_->setTraining(training);
  }
}

std::string ResidualBlock::describe() const {
  return fmt::format("ResidualBlock({}->{}, s{}{})", in_, out_, stride_,
                     projConv_ ? ", projection" : "");
}

double ResidualBlock::flopsPerSample() const {
  return conv1_.flopsPerSample() + conv2_.flopsPerSample() +
         (projConv_ ? projConv_->flopsPerSample() : 0.0);
}

}  // namespace braid::trainer
