// Rectified linear unit, elementwise max(x, 0).
#pragma once

#include "trainer/nn/layer.h"

namespace braid::trainer {

/// ReLU of any shape; the gradient at exactly 0 is taken as 0 (like PyTorch).
class Relu : public Layer {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override { return "ReLU"; }

 private:
  Tensor y_, dx_;
};

}  // namespace braid::trainer
