// Softmax followed by cross-entropy, averaged over the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/nn/tensor.h"

namespace braid::trainer {

/// The loss of one batch and how many of its samples were classified correctly.
struct LossResult {
  double loss = 0.0;    ///< mean over the batch of -log softmax(logits)[label]
  int64_t correct = 0;  ///< samples whose argmax (first on ties) equals the label
  int64_t count = 0;    ///< batch size
};

/// SoftmaxCrossEntropy over logits [N, K] and integer labels in [0, K).
///
/// forward() computes the loss with a max-shifted log-sum-exp (stable for large logits) and
/// keeps the probabilities; backward() returns dL/dlogits = (softmax - onehot) / N for the last
/// forward (scaled by `scale`, e.g. a loss scale or 1/accumulation steps).
class SoftmaxCrossEntropy {
 public:
  LossResult forward(const Tensor& logits, std::span<const int32_t> labels);
  LossResult forward(const Tensor& logits, std::span<const uint8_t> labels);
  const Tensor& backward(float scale = 1.0f);

 private:
  template <typename Label>
  LossResult forwardImpl(const Tensor& logits, std::span<const Label> labels);
  Tensor probs_, dlogits_;
  std::vector<int32_t> labels_;
};

}  // namespace braid::trainer
