// The -J output: the run's parameters and one object per table row, as JSON (read by
// tools/plot/braid-plot).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/perf/args.h"
#include "bench/format/table.h"

namespace braid::bench {

/// What describes a run besides its rows.
struct RunInfo {
  std::string collective;  ///< "all_reduce", ...
  int ranks = 1;
  std::string launcher;   ///< "braidrun", "mpirun", "single"
  std::string host;       ///< rank 0's host name
  std::string date;       ///< UTC, ISO 8601
  std::string transport;  ///< as asked ("auto" when braid chooses)
  std::string algo;       ///< as asked ("auto" when the tuner chooses)
  BenchArgs args;
};

/// A row plus what the tuner chose for it.
struct ReportRow {
  Row row;
  std::string algoChosen;  ///< braid's choice for this size ("" when unknown)
};

/// The whole document. Stable keys: collective, ranks, dtype, op, algo, transport, host, date,
/// launcher, params{...}, rows[{size, count, type, redop, root, algo, out_of_place{time_us,
/// algbw, busbw, wrong}, in_place{...}, baseline{name, time_us, busbw, ratio} | null}],
/// wrong_total, avg_busbw. "wrong" is null when validation was off.
nlohmann::json makeReport(const RunInfo& info, const std::vector<ReportRow>& rows,
                          int64_t wrongTotal, double avgBusBw);

/// Writes `doc` (indented) to `path`; throws kSystemError naming the file.
void writeReport(const std::string& path, const nlohmann::json& doc);

/// Current UTC time as "2026-11-21T07:30:00Z".
std::string utcNow();

}  // namespace braid::bench
