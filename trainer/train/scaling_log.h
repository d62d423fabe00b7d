// --report scaling --log FILE: the report's table as a log (CSV or JSON, by the extension), so
// the scaling efficiency is kept with the other monitor fields and braid-plot-train draws it.
#pragma once

#include <string>
#include <vector>

#include "trainer/train/scaling_report.h"

namespace braid::trainer {

/// The log's text: JSON {"scaling": [{"ranks", "samples_per_s", "speedup", "efficiency",
/// "comm_share", "overlap_share"}, ...]} (shares null where a run's log has none: an older braid-train's), or
/// CSV with those columns (empty cells for null).
std::string scalingLogText(const std::vector<ScalingRow>& rows, bool json);

/// Writes scalingLogText to `path` (.json: JSON, else CSV). Throws Error(kSystemError) naming
/// the file when it cannot be written.
void writeScalingLog(const std::string& path, const std::vector<ScalingRow>& rows);

}  // namespace braid::trainer
