// The performance monitor's measurements of optimizer steps (compute, communication, overlap,
// bytes all-reduced) and the --log-steps file of one JSON line per step.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace braid::trainer {

/// What one rank's optimizer steps spent their time on (one step, or summed over an epoch).
/// Field definitions: trainer/train/README.md, "Performance monitor".
struct StepTimes {
  int64_t steps = 0;           ///< optimizer steps summed here
  int64_t samples = 0;         ///< global training samples of those steps (all data ranks)
  double stepSeconds = 0;      ///< wall time of the steps
  double computeSeconds = 0;   ///< forward, backward and optimizer (disjoint from the wait)
  double waitSeconds = 0;      ///< blocked waiting for communication
  double overlapSeconds = 0;   ///< of computeSeconds: while an all-reduce of the step was in flight
  int64_t allReduceBytes = 0;  ///< payload all-reduced: elements x element size, summed over calls

  StepTimes& operator+=(const StepTimes& o);
  /// x / stepSeconds (0 when no time passed).
  double share(double seconds) const { return stepSeconds > 0 ? seconds / stepSeconds : 0.0; }
};

/// --log-steps FILE: one JSON object per optimizer step (rank 0's timing), written as the step
/// ends. Throws Error(kSystemError) naming the file when it cannot be written.
class StepLog {
 public:
  explicit StepLog(const std::string& path);
  /// `runStep` counts from the run's start (1-based), `epoch` is 1-based.
  void add(int64_t runStep, int epoch, const StepTimes& t);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace braid::trainer
