// braid-train --report scaling: the same training on 1, 2, 4... ranks (each run launched through
// braidrun), its JSON logs read back into a table of samples/s, speedup, scaling efficiency and
// the communication and overlap shares.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "trainer/train/options.h"

namespace braid::trainer {

/// One run of the report, from its JSON log (summed over its epochs).
struct ScalingRow {
  int ranks = 0;
  double samplesPerSec = 0;  ///< all epochs' samples / all epochs' training seconds
  double commShare = -1;     ///< comm_wait_seconds / step_seconds; -1: the log has none
  double overlapShare = -1;  ///< overlap_seconds / step_seconds; -1: the log has none
};

/// The row of a run on `ranks` ranks from its JSON log's text. Throws Error(kInvalidUsage)
/// naming `logName` when the text is not such a log or holds no epoch.
ScalingRow scalingRowFromLog(const std::string& jsonText, int ranks, const std::string& logName);

/// A row's speedup and efficiency against the first (smallest) rank count r0:
/// speedup = S_N / S_r0, efficiency = S_N / (N / r0 x S_r0) (with r0 = 1: S_N / (N x S_1)).
struct ScalingFigures {
  double speedup = 0;
  double efficiency = 0;
};
std::vector<ScalingFigures> scalingFigures(const std::vector<ScalingRow>& rows);

/// The table: each row with its scalingFigures.
std::string formatScalingTable(const std::vector<ScalingRow>& rows);

/// Runs the training `argv` describes (without --report, --report-ranks, --braidrun, --log,
/// --log-steps and --quiet, which the report sets) on each of `o.reportRanks` under the launcher
/// (`o.braidrun`, else braidrun next to this binary or in ../tools/), then prints the table to
/// `out` and, with `o.logPath`, writes it there (scaling_log.h; the file is created before the
/// first run, so an unwritable one fails at once). A failed run throws Error naming its rank
/// count, exit status and the tail of its stderr.
void runScalingReport(int argc, const char* const* argv, const TrainOptions& o, std::FILE* out);

}  // namespace braid::trainer
