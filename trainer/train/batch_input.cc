#include "trainer/train/batch_input.h"

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

}  // namespace braid::trainer
