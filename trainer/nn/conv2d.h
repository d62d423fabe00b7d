// 2-D convolution over NCHW, computed by oneDNN (the library PyTorch's CPU build uses too).
#pragma once

#include <memory>
#include <string>

#include "trainer/nn/layer.h"
#include "trainer/nn/param_store.h"

namespace braid::trainer {

/// Conv2d(in, out, kernel k x k, stride, zero padding), weight [out, in, k, k] and optional bias
/// [out], both Kaiming-uniform with fanIn = in*k*k (PyTorch's default). Input [N, in, H, W],
/// output [N, out, Ho, Wo] with Ho = (H + 2*pad - k) / stride + 1.
///
/// Forward, backward-data and backward-weights are oneDNN primitives that pick their own memory
/// layouts; tensors stay plain NCHW outside the layer (reordered in and out). Primitives are
/// built once per input shape and cached. Weight/bias gradients are added to the store's
/// gradients (accumulation over micro-batches works).
class Conv2d : public Layer {
 public:
  Conv2d(ParamStore& store, const std::string& name, int in, int out, int kernel, int stride,
         int pad, bool bias = true);
  ~Conv2d() override;
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override;
  double flopsPerSample() const override { return lastFlops_; }
  int in() const { return in_; }
  int out() const { return out_; }
  int kernel() const { return k_; }
  int stride() const { return stride_; }
  int pad() const { return pad_; }
  bool hasBias() const { return hasBias_; }

 private:
  struct Plan;  // the oneDNN primitives and memories for one input shape (conv2d.cc)

  ParamStore& store_;
  int in_, out_, k_, stride_, pad_;
  bool hasBias_;
  ParamId weight_, bias_ = 0;
  const Tensor* x_ = nullptr;
  double lastFlops_ = 0.0;
  std::unique_ptr<Plan> plan_;
  Tensor y_, dx_;

  Plan& planFor(const std::vector<int>& inputShape);
};

}  // namespace braid::trainer
