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

std::unique_ptr<Model> makeReplicatedModel(Communicator& comm, const TrainOptions& o) {
  auto model = makeModel(o.model, o.seed);
  ParamStore& store = model->store;
  if (comm.size() > 1) {
    comm.broadcast(store.params(), store.params(), store.numParams(), DataType::kFloat32, 0);
    if (store.numBuffers() > 0) {
      comm.broadcast(store.buffers(), store.buffers(), store.numBuffers(), DataType::kFloat32, 0);
    }
  }
  return model;
}

size_t bucketElements(const TrainOptions& o) {
  return std::max<size_t>(1, static_cast<size_t>(o.bucketMb * 1024 * 1024 / sizeof(float)));
}

std::vector<size_t> paramOffsets(const ParamStore& store) {
  std::vector<size_t> offsets;
  for (const ParamView& v : store.paramViews()) offsets.push_back(v.offset);
  return offsets;
}

}  // namespace braid::trainer
