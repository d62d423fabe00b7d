// The basic residual block of ResNet (He et al. 2016): two 3x3 convolutions and a shortcut.
#pragma once

#include <memory>
#include <string>

#include "trainer/nn/batch_norm.h"
#include "trainer/nn/conv2d.h"
#include "trainer/nn/layer.h"
#include "trainer/nn/relu.h"

namespace braid::trainer {

/// out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), where conv1 is 3x3 with `stride`,
/// conv2 is 3x3 stride 1 (both without bias, as batch norm follows), and the shortcut is the
/// identity when in == out and stride == 1, else a 1x1 convolution with `stride` plus batch norm
/// (projection). Parameters are registered conv1, bn1, conv2, bn2, [proj conv, proj bn].
class ResidualBlock : public Layer {
 public:
  ResidualBlock(ParamStore& store, const std::string& name, int in, int out, int stride);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  void setTraining(bool training) override;
  std::string describe() const override;
  double flopsPerSample() const override;
  bool hasProjection() const { return projConv_ != nullptr; }
  const Conv2d& conv1() const { return conv1_; }
  const BatchNorm2d& bn1() const { return bn1_; }
  const Conv2d& conv2() const { return conv2_; }
  const BatchNorm2d& bn2() const { return bn2_; }
  const Conv2d* projConv() const { return projConv_.get(); }
  const BatchNorm2d* projBn() const { return projBn_.get(); }

 private:
  int in_, out_, stride_;
  Conv2d conv1_;
  BatchNorm2d bn1_;
  Relu relu1_;
  Conv2d conv2_;
  BatchNorm2d bn2_;
  std::unique_ptr<Conv2d> projConv_;
  std::unique_ptr<BatchNorm2d> projBn_;
  Relu reluOut_;
  Tensor sum_, dx_;
};

}  // namespace braid::trainer
