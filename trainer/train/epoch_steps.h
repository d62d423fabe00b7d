// One epoch's loop of optimizer steps, shared by the data-parallel and the pipeline trainers:
// the sampler's batches, the epoch timing, the progress line, --max-steps.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainer/data/sampler.h"
#include "trainer/train/batch_sums.h"
#include "trainer/train/progress.h"

namespace braid::trainer {

/// What one epoch's steps took.
struct EpochSteps {
  int64_t steps = 0;        ///< optimizer steps in this epoch
  double epochSeconds = 0;  ///< the whole loop
  bool reachedMax = false;  ///< the run's step count reached maxSteps: no more epochs
};

/// For each batch `sampler` has left in its epoch (its position is the caller's to set): runs
/// `step(indices)` (which times itself: StepTimes), counts it in `runSteps`, runs
/// `afterStep(runSteps)` (may be empty; not timed: checks, checkpoints) and shows `progress` with
/// `sums`' mean loss (the step adds to `sums`). Stops early when maxSteps > 0 and `runSteps`
/// reaches it. Finishes `progress`.
EpochSteps runEpochSteps(DistributedSampler& sampler, Progress& progress, int64_t maxSteps,
                         int64_t& runSteps, const BatchSums& sums,
                         const std::function<void(const std::vector<int64_t>& indices)>& step,
                         const std::function<void(int64_t runStep)>& afterStep = {});

}  // namespace braid::trainer
