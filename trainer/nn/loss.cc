#include "trainer/nn/loss.h"

#include <cmath>

#include "common/error.h"

namespace braid::trainer {

template <typename Label>
LossResult SoftmaxCrossEntropy::forwardImpl(const Tensor& logits, std::span<const Label> labels) {
  BRAID_ENFORCE(logits.shape.size() == 2 && labels.size() == static_cast<size_t>(logits.dim(0)),
                ErrorCode::kInvalidUsage,
                "SoftmaxCrossEntropy: logits {} with {} labels (want [N, K] and N labels)",
                shapeString(logits.shape), labels.size());
  const int n = logits.dim(0), k = logits.dim(1);
  probs_.resize(logits.shape);
  labels_.resize(n);
  LossResult r;
  r.count = n;
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(labels[i]);
    BRAID_ENFORCE(label >= 0 && label < k, ErrorCode::kInvalidUsage,
                  "SoftmaxCrossEntropy: label {} of sample {} outside [0, {})", label, i, k);
    labels_[i] = label;
    const float* z = logits.ptr() + static_cast<size_t>(i) * k;
    float* p = probs_.ptr() + static_cast<size_t>(i) * k;
    int argmax = 0;
    for (int j = 1; j < k; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    const float zmax = z[argmax];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    const double logSum = std::log(sum);
    for (int j = 0; j < k; ++j) p[j] = static_cast<float>(std::exp(z[j] - zmax - logSum));
    total += logSum - (z[label] - zmax);
    if (argmax == label) ++r.correct;
  }
  r.loss = n > 0 ? total / n : 0.0;
  return r;
}

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const int32_t> labels) {
  return forwardImpl(logits, labels);
}

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const uint8_t> labels) {
  return forwardImpl(logits, labels);
}

const Tensor& SoftmaxCrossEntropy::backward(float scale) {
  const int n = probs_.shape.empty() ? 0 : probs_.dim(0);
  BRAID_ENFORCE(n > 0, ErrorCode::kInvalidUsage, "SoftmaxCrossEntropy: backward before forward");
  const int k = probs_.dim(1);
  dlogits_.resize(probs_.shape);
  const float s = scale / static_cast<float>(n);
  for (int i = 0; i < n; ++i) {
    const float* p = probs_.ptr() + static_cast<size_t>(i) * k;
    float* d = dlogits_.ptr() + static_cast<size_t>(i) * k;
    for (int j = 0; j < k; ++j) d[j] = s * (p[j] - (j == labels_[i] ? 1.0f : 0.0f));
  }
  return dlogits_;
}

}  // namespace braid::trainer
