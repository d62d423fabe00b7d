// The pieces of one training step and of evaluation that every strategy shares (data parallel
// in trainer.cc, the parameter-server workers in trainer/ps/): loading a batch, forward and
// backward over --accum micro-batches, and counting a share of the test set.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "trainer/data/dataset.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/nn/tensor.h"

namespace braid::trainer {

/// Keeps the first `limit` samples (0 or more than there are: all).
void truncateDataset(Dataset& data, int64_t limit);

/// Fills `x` ([n, inputShape...]) and `labels` with the samples `indices`.
void loadBatch(const Dataset& data, std::span<const int64_t> indices,
               const std::vector<int>& inputShape, Tensor& x, std::vector<int32_t>& labels);

/// What the samples of a step (or an epoch) gave: sums, so ranks can add theirs.
struct BatchSums {
  double lossTimesSamples = 0;
  double correct = 0;
  double samples = 0;
};

/// Reused between steps so batches do not reallocate.
struct StepBuffers {
  SoftmaxCrossEntropy ce;
  Tensor x;
  std::vector<int32_t> labels;
};

/// Forward and backward of `indices` in `accum` equal micro-batches (the last takes the rest),
/// the loss gradient scaled by lossScale / accum so the gradients add up to the mean over
/// `indices` (times lossScale). Gradients accumulate into the model's store (zero them first).
/// `beforeLastBackward` (may be empty) runs before the last micro-batch's forward: DDP arms its
/// gradient sync there. Adds the samples' loss and correct counts to `sums`.
void forwardBackward(Model& model, const Dataset& train, std::span<const int64_t> indices,
                     int accum, float lossScale, const std::function<void()>& beforeLastBackward,
                     StepBuffers& buffers, BatchSums& sums);

/// Correct predictions and samples seen over test samples share, share + shares, ... (a rank's
/// strided share of the test set), in evaluation mode; the model is left in training mode.
struct EvalCounts {
  double correct = 0;
  double seen = 0;
};
EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares);

}  // namespace braid::trainer
