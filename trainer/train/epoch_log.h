// The per-epoch results and the CSV / JSON log file they go to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/train/batch_sums.h"
#include "trainer/train/options.h"
#include "trainer/train/step_times.h"

namespace braid::trainer {

/// One epoch's results, identical in the console line and the log.
struct EpochStats {
  int epoch = 0;             ///< 1-based
  int64_t steps = 0;         ///< optimizer steps in this epoch
  double trainLoss = 0;      ///< mean over all ranks' training samples
  double trainAcc = 0;       ///< fraction of training samples classified right
  double testAcc = 0;        ///< fraction of test samples classified right
  double samplesPerSec = 0;  ///< global training samples per second of training time
  double commWaitShare = 0;  ///< rank 0's time blocked on requests / its step time
  double seconds = 0;        ///< training wall time of the epoch (evaluation excluded)
  bool fp16 = false;         ///< --precision fp16: the console line shows the two below
  int64_t skippedSteps = 0;  ///< fp16: steps skipped for inf/NaN gradients in this epoch
  double lossScale = 1;      ///< fp16: the loss scale at the end of the epoch (fp32: 1)
  /// The performance monitor's sums over the epoch's steps (rank 0's; ddp and pipeline): the
  /// console line shows compute / overlap shares and all-reduce bytes/s, the logs every field
  /// (empty CSV cells and JSON nulls without it).
  std::optional<StepTimes> times;
  /// A strategy's own fields: appended to the console line, and (a JSON object's text, "" for
  /// none) merged into the epoch's JSON row; the CSV log leaves them out.
  std::string extraConsole;
  std::string extraJson;
};

/// An epoch's statistics from its sums over all ranks, its training wall time, and the time
/// spent in steps and, of that, blocked on requests (one rank's, or summed over ranks). The test
/// accuracy, the fp16 fields and a strategy's extras are the caller's to fill.
EpochStats epochStatsFromSums(int epoch, int64_t steps, const BatchSums& sums, double epochSeconds,
                              double stepSeconds, double waitSeconds);

/// The JSON log's "run" object (EpochLog's runInfoJson): what every strategy records (strategy,
/// model, optimizer, lr, epochs, global_batch, ranks, seed, threads_per_rank, params), with the
/// strategy's own keys `extraJson` (a JSON object's text) merged in.
std::string runInfoJson(const TrainOptions& o, double lr, int ranks, int threads, size_t numParams,
                        const std::string& extraJson);

/// The console line of an epoch.
std::string formatEpoch(const EpochStats& s, int epochs);

/// Writes the log file: CSV (header + one row per epoch, appended as epochs end) or JSON (one
/// document {"run": {...}, "epochs": [...]} rewritten after every epoch, so it is always whole).
/// The format follows the extension (.csv / .json). Throws Error(kSystemError) naming the file.
class EpochLog {
 public:
  /// `runInfo` is a JSON object text describing the run (flags, ranks), kept in the JSON log.
  EpochLog(std::string path, std::string runInfoJson);
  void add(const EpochStats& s);

 private:
  std::string path_;
  std::string runInfoJson_;
  bool json_;
  std::vector<EpochStats> rows_;
};

}  // namespace braid::trainer
