#include "trainer/train/batch_step.h"

#include <algorithm>

#include "trainer/data/batch.h"

namespace braid::trainer {

void truncateDataset(Dataset& data, int64_t limit) {
  if (limit <= 0 || limit >= data.count) return;
  data.count = limit;
  data.images.resize(static_cast<size_t>(limit * data.imageSize()));
  data.labels.resize(static_cast<size_t>(limit));
}

void loadBatch(const Dataset& data, std::span<const int64_t> indices,
               const std::vector<int>& inputShape, Tensor& x, std::vector<int32_t>& labels) {
  std::vector<int> shape{static_cast<int>(indices.size())};
  shape.insert(shape.end(), inputShape.begin(), inputShape.end());
  x.resize(shape);
  labels.resize(indices.size());
  gatherBatch(data, indices, std::span<float>(x.data), std::span<int32_t>(labels));
}

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
    sums.lossTimesSamples += r.loss * static_cast<double>(r.count);
    sums.correct += static_cast<double>(r.correct);
    sums.samples += static_cast<double>(r.count);
  }
}

EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares) {
  constexpr int64_t kEvalBatch = 500;
  model.net.setTraining(false);
  std::vector<int64_t> mine;
  for (int64_t i = share; i < test.count; i += shares) mine.push_back(i);
  SoftmaxCrossEntropy ce;
  Tensor x;
  std::vector<int32_t> labels;
  EvalCounts counts;
  for (size_t at = 0; at < mine.size(); at += kEvalBatch) {
    const size_t n = std::min<size_t>(kEvalBatch, mine.size() - at);
    loadBatch(test, std::span<const int64_t>(mine).subspan(at, n), model.inputShape, x, labels);
    const LossResult r = ce.forward(model.net.forward(x), labels);
    counts.correct += static_cast<double>(r.correct);
    counts.seen += static_cast<double>(r.count);
  }
  model.net.setTraining(true);
  return counts;
}

}  // namespace braid::trainer
