#include "trainer/train/batch_step.h"

#include <algorithm>

namespace braid::trainer {

void forwardBackward(Model& model, const Dataset& train, std::span<const int64_t> indices,
                     int accum, float lossScale, const std::function<void()>& beforeLastBackward,
                     StepBuffers& b, BatchSums& sums) {
  const size_t micro = indices.size() / static_cast<size_t>(accum);
  for (int k = 0; k < accum; ++k) {
    const auto part =
        indices.subspan(k * micro, k + 1 == accum ? indices.size() - k * micro : micro);
    loadBatch(train, part, model.inputShape, b.x, b.labels);
    if (k + 1 == accum && beforeLastBackward) beforeLastBackward();
    const LossResult r = b.ce.forward(model.net.forward(b.x), b.labels);
    model.net.backward(b.ce.backward(lossScale / static_cast<float>(accum)));
    sums.add(r);
  }
}

EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares,
                        const InferBatch& infer) {
  constexpr int64_t kEvalBatch = 500;
  model.net.setTraining(false);
  std::vector<int64_t> mine;
  for (int64_t i = share; i < test.count; i += shares) mine.push_back(i);
  EvalCounts counts;
  for (size_t at = 0; at < mine.size(); at += kEvalBatch) {
    const size_t n = std::min<size_t>(kEvalBatch, mine.size() - at);
    const LossResult r = infer(std::span<const int64_t>(mine).subspan(at, n));
    counts.correct += static_cast<double>(r.correct);
    counts.seen += static_cast<double>(r.count);
  }
  model.net.setTraining(true);
  return counts;
}

EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares) {
  SoftmaxCrossEntropy ce;
  Tensor x;
  std::vector<int32_t> labels;
  return countCorrect(model, test, share, shares, [&](std::span<const int64_t> batch) {
    loadBatch(test, batch, model.inputShape, x, labels);
    return ce.forward(model.net.forward(x), labels);
  });
}

}  // namespace braid::trainer
