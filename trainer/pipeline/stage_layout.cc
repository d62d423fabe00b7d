#include "trainer/pipeline/stage_layout.h"

#include <algorithm>

#include "common/error.h"

namespace braid::trainer {

PipelineLayout pipelineLayout(int rank, int worldSize, int stages) {
  BRAID_ENFORCE(stages >= 1 && worldSize % stages == 0 && rank >= 0 && rank < worldSize,
                ErrorCode::kInvalidUsage,
                "--stages {} does not divide the {} ranks (rank {}; ranks = stages x replicas)",
                stages, worldSize, rank);
  PipelineLayout l;
  l.stages = stages;
  l.replicas = worldSize / stages;
  l.stage = rank % stages;
  l.pipeline = rank / stages;
  if (!l.first()) l.prevRank = rank - 1;
  if (!l.last()) l.nextRank = rank + 1;
  return l;
}

std::vector<std::vector<int>> layerInputShapes(Model& model) {
  std::vector<int> shape{1};
  shape.insert(shape.end(), model.inputShape.begin(), model.inputShape.end());
  Tensor x(shape);
  std::fill(x.data.begin(), x.data.end(), 0.0f);
  model.net.setTraining(false);
  std::vector<std::vector<int>> shapes;
  const Tensor* cur = &x;
  for (size_t i = 0; i < model.net.size(); ++i) {
    shapes.emplace_back(cur->shape.begin() + 1, cur->shape.end());
    cur = &model.net.forwardRange(i, i + 1, *cur);
  }
  shapes.emplace_back(cur->shape.begin() + 1, cur->shape.end());
  model.net.setTraining(true);
  return shapes;
}

}  // namespace braid::trainer
