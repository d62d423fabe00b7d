#include "trainer/train/epoch_steps.h"

#include "trainer/train/seconds.h"

namespace braid::trainer {
EpochSteps runEpochSteps(DistributedSampler& sampler, Progress& progress, int64_t maxSteps,
                         int64_t& runSteps, const BatchSums& sums,
                         const std::function<void(const std::vector<int64_t>& indices)>& step,
                         const std::function<void(int64_t runStep)>& afterStep) {
  EpochSteps e;
  std::vector<int64_t> indices;
  const auto epochStart = Clock::now();
  while (sampler.next(indices)) {
    step(indices);
    ++e.steps;
    ++runSteps;
    if (afterStep) afterStep(runSteps);
    progress.update(e.steps, sums.meanLoss());
    if (maxSteps > 0 && runSteps >= maxSteps) {
      e.reachedMax = true;
      break;
    }
  }
  e.epochSeconds = secondsSince(epochStart);
  progress.finish();
  return e;
}

}  // namespace braid::trainer
