// -t/--nthreads: the ranks of one process as its threads. Each thread is one rank of the job,
// rank = process rank x threads + thread, with a World (and so a communicator) of its own, and
// runs the same per-rank code a process rank runs.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bench/perf/world.h"
#include "braid/braid.hpp"

namespace braid::bench {

/// One rank's run: returns its exit code, throws on an error.
using RankMain = std::function<int(World& world)>;
/// Says that `rank` failed with `error` (called on the failing thread).
using RankError = std::function<void(int rank, const std::exception& error)>;

/// Runs `threads` ranks on threads of this process, joined into one job of process.size() x
/// threads ranks through a unique id handed out over `process` (collective over its ranks).
/// Returns the largest exit code, or nullopt when a rank failed (reported through `onError`).
/// A rank's failure ends the run: the others get a grace period to end on their own (they fail
/// too, as their peer is gone), then the process exits with code 1 without waiting for them.
std::optional<int> runThreadRanks(World& process, int threads, const Options& options,
                                  const std::string& program, const RankMain& rankMain,
                                  const RankError& onError);

}  // namespace braid::bench
