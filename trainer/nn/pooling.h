// Max pooling, global average pooling and flatten: layers without parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/nn/layer.h"

namespace braid::trainer {

/// MaxPool2d(kernel, stride), no padding: [N, C, H, W] -> [N, C, (H-k)/s+1, (W-k)/s+1]. The
/// gradient goes to the first maximum of each window (ties: the earliest in row-major order).
class MaxPool2d : public Layer {
 public:
  MaxPool2d(int kernel, int stride);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override;

 private:
  int k_, stride_;
  std::vector<int> inShape_;
  std::vector<uint32_t> argmax_;  // flat input index of each output's maximum
  Tensor y_, dx_;
};

/// Global average pooling: [N, C, H, W] -> [N, C].
class GlobalAvgPool : public Layer {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override { return "GlobalAvgPool"; }

 private:
  std::vector<int> inShape_;
  Tensor y_, dx_;
};

/// [N, ...] -> [N, prod(...)]; backward restores the input shape.
class Flatten : public Layer {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override { return "Flatten"; }

 private:
  std::vector<int> inShape_;
  Tensor y_, dx_;
};

}  // namespace braid::trainer
