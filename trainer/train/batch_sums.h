// What the samples of a step (or an epoch) gave, as sums, so micro-batches, stages and ranks can
// add theirs; every strategy's epoch statistics come from them (epoch_log.h).
#pragma once

#include "trainer/nn/loss.h"

namespace braid::trainer {

struct BatchSums {
  double lossTimesSamples = 0;
  double correct = 0;
  double samples = 0;

  /// Adds one batch's loss result.
  void add(const LossResult& r) {
    lossTimesSamples += r.loss * static_cast<double>(r.count);
    correct += static_cast<double>(r.correct);
    samples += static_cast<double>(r.count);
  }
  BatchSums& operator+=(const BatchSums& o) {
    lossTimesSamples += o.lossTimesSamples;
    correct += o.correct;
    samples += o.samples;
    return *this;
  }
  /// The mean loss of the samples (0 without any).
  double meanLoss() const { return samples > 0 ? lossTimesSamples / samples : 0.0; }
};

}  // namespace braid::trainer
