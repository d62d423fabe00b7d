// Batch normalisation over the channels of NCHW activations.
#pragma once

#include <string>
#include <vector>

#include "trainer/nn/layer.h"
#include "trainer/nn/param_store.h"

namespace braid::trainer {

/// BatchNorm2d(C): y = gamma * (x - mean) / sqrt(var + eps) + beta per channel.
///
/// Training mode normalises with this batch's statistics over (N, H, W) on this rank only (like
/// PyTorch DDP without SyncBatchNorm) and updates the running statistics with `momentum`:
/// running = (1 - momentum) * running + momentum * batch, using the unbiased variance for
/// running_var (as PyTorch). Eval mode normalises with the running statistics. gamma/beta are
/// parameters (init 1 and 0); running_mean/running_var are ParamStore buffers (init 0 and 1),
/// not parameters, so they receive no gradient. Also accepts [N, C] input (H = W = 1).
class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(ParamStore& store, const std::string& name, int channels, float momentum = 0.1f,
              float eps = 1e-5f);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  std::string describe() const override;
  int channels() const { return c_; }
  float momentum() const { return momentum_; }
  float eps() const { return eps_; }
  /// Flat buffer offset of running_mean; running_var follows it.
  size_t bufferBegin() const { return bufferBegin_; }

 private:
  ParamStore& store_;
  int c_;
  float momentum_, eps_;
  size_t bufferBegin_;
  ParamId gamma_, beta_, runningMean_, runningVar_;
  bool forwardWasTraining_ = true;
  std::vector<float> invStd_;  // per channel, from the last forward
  Tensor xhat_, y_, dx_;
};

}  // namespace braid::trainer
