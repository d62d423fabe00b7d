// Proves a pipeline schedule: runs every stage's operation list against the others, with the
// messages each operation sends and receives, and reports mismatches and deadlocks.
#pragma once

#include <string>
#include <vector>

#include "trainer/pipeline/schedule.h"

namespace braid::trainer {

/// What running the stages' lists together showed. Durations are in abstract units.
struct PipelineCheck {
  std::string error;              ///< empty when the schedule is correct, else what went wrong
  double makespan = 0;            ///< when the last operation of the step ends
  double bubble = 0;              ///< idle stage-time / (stages x makespan)
  std::vector<int> peakInFlight;  ///< per stage: most micro-batches forwarded, not yet backward
};

/// Runs `ops` (element s: stage s's operations, as stageOps() makes them) symbolically. Forward
/// m on stage s > 0 receives micro-batch m's activation from stage s-1, which sends it when its
/// forward m ends; backward m on stage s < S-1 receives its gradient from stage s+1 likewise.
/// Each link delivers in sending order and a receive must find the micro-batch it expects at
/// the head (the executor's tags would refuse anything else). Sends never hold up their stage
/// (the executor's SendPumps drive them). Each operation starts as soon as
/// its stage is free and its message has arrived, and takes `forwardCost` or `backwardCost`.
/// Errors: an operation list that does not hold exactly one forward and one backward per
/// micro-batch, a backward before its forward, an out-of-order message (named with both micro
/// batches), and a deadlock (every stage's next operation and what it waits for).
PipelineCheck verifyPipeline(const std::vector<std::vector<StageOp>>& ops, int micros,
                             double forwardCost = 1, double backwardCost = 2);

/// The textbook bubble of a fill-drain pipeline with equal stages: (S-1)/(M+S-1).
double expectedBubble(int stages, int micros);

}  // namespace braid::trainer
