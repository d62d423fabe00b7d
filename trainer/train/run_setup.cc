#include "trainer/train/run_setup.h"

#include <algorithm>
#include <thread>

#include "trainer/nn/blas.h"
#include "trainer/train/batch_input.h"

namespace braid::trainer {

int applyBlasThreads(const TrainOptions& o, int ranks) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / ranks);
  setBlasThreads(threads);
  return threads;
}

TrainData loadTrainData(const TrainOptions& o) {
  const std::string dir = o.dataDir.empty() ? kDefaultFashionMnistDir : o.dataDir;
  TrainData data{loadFashionMnist(dir, Split::kTrain), loadFashionMnist(dir, Split::kTest)};
  truncateDataset(data.train, o.limitTrain);
  truncateDataset(data.test, o.limitTest);
  return data;
}

OptimizerOptions runOptimizerOptions(const TrainOptions& o, int64_t stepsPerEpoch) {
  OptimizerOptions options = o.optimizerOptions();
  if (o.lrSchedule == "cosine") {
    const int64_t runSteps = stepsPerEpoch * o.epochs;
    options.decaySteps = o.maxSteps > 0 ? std::min<int64_t>(o.maxSteps, runSteps) : runSteps;
  }
  return options;
}

}  // namespace braid::trainer
