// What every strategy's training loop (ddp, ps, pipeline) feeds the model: a truncated data set
// and batches gathered into tensors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/data/dataset.h"
#include "trainer/nn/tensor.h"

namespace braid::trainer {

/// Keeps the first `limit` samples (0 or more than there are: all).
void truncateDataset(Dataset& data, int64_t limit);

/// Fills `x` ([n, inputShape...]) and `labels` with the samples `indices`.
void loadBatch(const Dataset& data, std::span<const int64_t> indices,
               const std::vector<int>& inputShape, Tensor& x, std::vector<int32_t>& labels);

}  // namespace braid::trainer
