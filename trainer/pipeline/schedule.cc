#include "trainer/pipeline/schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace braid::trainer {

PipelineSchedule parsePipelineSchedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::k1f1b;
  fail(ErrorCode::kInvalidUsage, "--schedule '{}' is unknown; use gpipe or 1f1b", name);
}

const char* pipelineScheduleName(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kGpipe ? "gpipe" : "1f1b";
}

std::vector<StageOp> stageOps(PipelineSchedule schedule, int stages, int micros, int stage) {
  BRAID_ENFORCE(
      stages >= 1 && micros >= 1 && stage >= 0 && stage < stages, ErrorCode::kInvalidUsage,
      "pipeline schedule: stage {} of {} stages with {} micro-batches", stage, stages, micros);
  std::vector<StageOp> ops;
  ops.reserve(2 * static_cast<size_t>(micros));
  if (schedule == PipelineSchedule::kGpipe) {
    for (int m = 0; m < micros; ++m) ops.push_back({StageOp::kForward, m});
    for (int m = micros; m-- > 0;) ops.push_back({StageOp::kBackward, m});
    return ops;
  }
  // 1F1B: the warm-up fills the stages below this one; in the steady state each backward frees
  // the activations of the oldest micro-batch before the next forward stores new ones.
  const int warmup = std::min(stages - 1 - stage, micros);
  int forwards = 0, backwards = 0;
  while (forwards < warmup) ops.push_back({StageOp::kForward, forwards++});
  while (forwards < micros) {
    ops.push_back({StageOp::kForward, forwards++});
    ops.push_back({StageOp::kBackward, backwards++});
  }
  while (backwards < micros) ops.push_back({StageOp::kBackward, backwards++});
  return ops;
}

std::vector<std::vector<StageOp>> pipelineOps(PipelineSchedule schedule, int stages, int micros) {
  std::vector<std::vector<StageOp>> all;
  for (int s = 0; s < stages; ++s) all.push_back(stageOps(schedule, stages, micros, s));
  return all;
}

std::string formatOps(const std::vector<StageOp>& ops) {
  std::string text;
  for (const StageOp& op : ops) {
    if (!text.empty()) text += ' ';
    text += fmt::format("{}{}", op.kind == StageOp::kForward ? 'F' : 'B', op.micro);
  }
  return text;
}

}  // namespace braid::trainer
