// Fully connected layer y = x W^T + b (PyTorch's nn.Linear layout).
#pragma once

#include <string>

#include "trainer/nn/layer.h"
#include "trainer/nn/param_store.h"

namespace braid::trainer {

/// Linear(in, out): weight [out, in] and bias [out], Kaiming-uniform initialised with fanIn = in.
/// Accepts any input whose per-sample size is `in` (e.g. [N, in] or [N, C, H, W]); output [N, out].
class Linear : public Layer {
 public:
  Linear(ParamStore& store, const std::string& name, int in, int out);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override;
  double flopsPerSample() const override { return 2.0 * in_ * out_; }
  int in() const { return in_; }
  int out() const { return out_; }

 private:
  ParamStore& store_;
  int in_, out_;
  ParamId weight_, bias_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

}  // namespace braid::trainer
