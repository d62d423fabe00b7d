// Where a rank sits in a pipeline-parallel job, and what its stage runs.
#pragma once

#include <vector>

#include "trainer/nn/models.h"
#include "trainer/pipeline/partition.h"

namespace braid::trainer {

/// World rank r = pipeline * stages + stage: the stages of one pipeline are neighbouring ranks,
/// and the replicas of a stage (one per pipeline) form its data-parallel group.
struct PipelineLayout {
  int stages = 1;
  int replicas = 1;  ///< pipelines (world size / stages)
  int stage = 0;
  int pipeline = 0;   ///< this rank's pipeline = its index in the stage's replica group
  int prevRank = -1;  ///< world rank of the stage before (-1 on the first stage)
  int nextRank = -1;  ///< world rank of the stage after (-1 on the last stage)
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
};

/// Throws kInvalidUsage when `stages` does not divide `worldSize` or `rank` is outside it.
PipelineLayout pipelineLayout(int rank, int worldSize, int stages);

/// Per-sample shape of what each top-level layer takes: element i is layer i's input ({1, 28,
/// 28} for a ResNet's first layer), the last element the model's output. Found by one forward of
/// a 1-sample batch in eval mode (which leaves BN running statistics alone).
std::vector<std::vector<int>> layerInputShapes(Model& model);

}  // namespace braid::trainer
