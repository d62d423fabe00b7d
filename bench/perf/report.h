// The -J output: the run's parameters and one object per table row, as JSON (read by
// tools/plot/braid-plot).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/perf/args.h"
#include "bench/format/table.h"

namespace braid::bench {

/// "same L3", "apart", "sharing a CPU" or "n/a": the class a placement probe's round trip falls
/// in. The boundary of the first two, 150 ns, lies between the two placements the 2-vCPU VM shows
/// (~60 ns and ~330 ns); from 2 us the two ranks took turns on one CPU (threads of one process,
/// or more ranks than cores: ~4 us here), which says nothing about their caches.
const char* placementClass(double roundTripNs);

/// The placement probe's view of the run (bench/perf/placement.h).
struct PlacementInfo {
  int cpu0 = -1, cpu1 = -1;  ///< at the first probe
  double startNs = -1, endNs = -1;
};

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
  PlacementInfo placement;
};

/// A row plus what the tuner chose for it and the placement it ran in.
struct ReportRow {
  Row row;
  std::string algoChosen;  ///< braid's choice for this size ("" when unknown)
  double placementBeforeNs = -1;  ///< ranks 0-1 cache-line round trip before the size (-1: n/a)
  double placementAfterNs = -1;   ///< and after it
};


/// The whole document. Stable keys: collective, ranks, dtype, op, algo, transport, host, date,
/// launcher, params{...}, placement{cpus[2], round_trip_ns_start, round_trip_ns_end, class},
/// rows[{size, count, type, redop, root, algo, out_of_place{time_us, algbw, busbw, wrong},
/// in_place{...}, baseline{name, time_us, busbw, ratio} | null, placement_ns{before, after,
/// class}}], wrong_total, avg_busbw. "wrong" is null when validation was off; placement figures
/// are null where the probe could not measure (one rank, ranks 0 and 1 on two hosts).
nlohmann::json makeReport(const RunInfo& info, const std::vector<ReportRow>& rows,
                          int64_t wrongTotal, double avgBusBw);

/// Writes `doc` (indented) to `path`; throws kSystemError naming the file.
void writeReport(const std::string& path, const nlohmann::json& doc);

/// Current UTC time as "2026-11-21T07:30:00Z".
std::string utcNow();

}  // namespace braid::bench
