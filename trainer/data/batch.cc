#include "trainer/data/batch.h"

#include <cstring>

#include "common/error.h"

namespace braid::trainer {

void gatherBatch(const Dataset& data, std::span<const int64_t> indices, std::span<float> images,
                 std::span<int32_t> labels) {
  const size_t imageSize = static_cast<size_t>(data.imageSize());
  BRAID_ENFORCE(images.size() >= indices.size() * imageSize, ErrorCode::kInvalidUsage,
                "gatherBatch: image buffer holds {} floats, a batch of {} needs {}", images.size(),
                indices.size(), indices.size() * imageSize);
  BRAID_ENFORCE(labels.size() >= indices.size(), ErrorCode::kInvalidUsage,
                "gatherBatch: label buffer holds {} labels, a batch of {} needs {}", labels.size(),
                indices.size(), indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    BRAID_ENFORCE(indices[i] >= 0 && indices[i] < data.count, ErrorCode::kInvalidUsage,
                  "gatherBatch: index {} at batch position {} is outside the data set's 0..{}",
                  indices[i], i, data.count - 1);
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    const size_t s = static_cast<size_t>(indices[i]);
    std::memcpy(images.data() + i * imageSize, data.images.data() + s * imageSize,
                imageSize * sizeof(float));
    labels[i] = data.labels[s];
  }
}

}  // namespace braid::trainer
