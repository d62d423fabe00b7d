// Pipeline schedules as data: for each stage, the ordered forward/backward micro-batch operations
// one training step runs (GPipe fill-drain, 1F1B). The executor (stage_step.h) follows these
// lists; schedule_verifier.h proves them.
#pragma once

#include <string>
#include <vector>

namespace braid::trainer {

enum class PipelineSchedule { kGpipe, k1f1b };

/// "gpipe" or "1f1b"; throws kInvalidUsage naming the value otherwise.
PipelineSchedule parsePipelineSchedule(const std::string& name);
const char* pipelineScheduleName(PipelineSchedule schedule);

/// One operation of a stage: the forward or the backward of micro-batch `micro`.
struct StageOp {
  enum Kind { kForward, kBackward } kind = kForward;
  int micro = 0;
  bool operator==(const StageOp&) const = default;
};

/// The operations of `stage` (0-based) among `stages` for `micros` micro-batches. Forwards
/// always run in micro-batch order 0..M-1 (so activations stream in order).
///   gpipe: F0 .. F(M-1), then B(M-1) .. B0 (fill, then drain; the newest first, so the last
///          forward's state is still in the layers for the first backward).
///   1f1b:  min(S-1-stage, M) warm-up forwards, then one forward and one backward in turn,
///          then the remaining backwards; backwards in order 0..M-1. At most S-stage micro-batches
///          are in flight on a stage, against M for gpipe.
/// Throws kInvalidUsage when stages < 1, micros < 1 or stage is out of range.
std::vector<StageOp> stageOps(PipelineSchedule schedule, int stages, int micros, int stage);

/// stageOps for every stage: element s is stage s's list.
std::vector<std::vector<StageOp>> pipelineOps(PipelineSchedule schedule, int stages, int micros);

/// "F0 F1 B0 ..." for messages and tests.
std::string formatOps(const std::vector<StageOp>& ops);

}  // namespace braid::trainer
