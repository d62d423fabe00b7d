// The pieces of one training step and of evaluation that the strategies share: forward and
// backward over --accum micro-batches (data parallel in trainer.cc, the parameter-server workers
// in trainer/ps/), and counting a share of the test set (all three; the pipeline's batches flow
// through its stages).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "trainer/data/dataset.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/nn/tensor.h"
#include "trainer/train/batch_input.h"
#include "trainer/train/epoch_log.h"

namespace braid::trainer {

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
/// strided share of the test set), in evaluation mode and in batches of at most 500, each given
/// to `infer` (which returns its loss result); the model is left in training mode.
struct EvalCounts {
  double correct = 0;
  double seen = 0;
};
using InferBatch = std::function<LossResult(std::span<const int64_t> batch)>;
EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares,
                        const InferBatch& infer);

/// The same with the whole model on this rank.
EvalCounts countCorrect(Model& model, const Dataset& test, int share, int shares);

}  // namespace braid::trainer
