// 2-D convolution over NCHW via im2col and one sgemm per batch.
#pragma once

#include <string>
#include <vector>

#include "trainer/nn/layer.h"
#include "trainer/nn/param_store.h"

namespace braid::trainer {

/// Conv2d(in, out, kernel k x k, stride, zero padding), weight [out, in, k, k] and optional bias
/// [out], both Kaiming-uniform with fanIn = in*k*k (PyTorch's default). Input [N, in, H, W],
/// output [N, out, Ho, Wo] with Ho = (H + 2*pad - k) / stride + 1.
///
/// The whole batch is unfolded into one column matrix [in*k*k, N*Ho*Wo], so forward is one sgemm
/// and backward two; the column matrix is kept from forward for the weight gradient.
class Conv2d : public Layer {
 public:
  Conv2d(ParamStore& store, const std::string& name, int in, int out, int kernel, int stride,
         int pad, bool bias = true);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override;
  double flopsPerSample() const override { return lastFlops_; }

 private:
  ParamStore& store_;
  int in_, out_, k_, stride_, pad_;
  bool hasBias_;
  ParamId weight_, bias_ = 0;
  const Tensor* x_ = nullptr;
  int ho_ = 0, wo_ = 0;
  double lastFlops_ = 0.0;
  std::vector<float> col_, dcol_, ymat_;  // [in*k*k, N*P] twice and [out, N*P]
  Tensor y_, dx_;

  void im2col(const Tensor& x);
  void col2im(const float* dcol, Tensor& dx) const;
};

}  // namespace braid::trainer
