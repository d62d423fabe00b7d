#include "trainer/train/step_times.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace braid::trainer {

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  steps += o.steps;
  samples += o.samples;
  stepSeconds += o.stepSeconds;
  computeSeconds += o.computeSeconds;
  waitSeconds += o.waitSeconds;
  overlapSeconds += o.overlapSeconds;
  allReduceBytes += o.allReduceBytes;
  return *this;
}

StepLog::StepLog(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
  BRAID_ENFORCE(out_.good(), ErrorCode::kSystemError, "cannot write the step log '{}'", path_);
}

void StepLog::add(int64_t runStep, int epoch, const StepTimes& t) {
  const double perSecond = t.stepSeconds > 0 ? 1.0 / t.stepSeconds : 0.0;
  const nlohmann::json line = {
      {"step", runStep},
      {"epoch", epoch},
      {"samples", t.samples},
      {"seconds", t.stepSeconds},
      {"compute_seconds", t.computeSeconds},
      {"comm_wait_seconds", t.waitSeconds},
      {"overlap_seconds", t.overlapSeconds},
      {"allreduce_bytes", t.allReduceBytes},
      {"samples_per_s", t.samples * perSecond},
      {"allreduce_bytes_per_s", static_cast<double>(t.allReduceBytes) * perSecond}};
  out_ << line.dump() << '\n';
  out_.flush();
  BRAID_ENFORCE(out_.good(), ErrorCode::kSystemError, "cannot append to the step log '{}'", path_);
}

}  // namespace braid::trainer
