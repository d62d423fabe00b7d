// Proves a schedule computes its collective: runs every rank's program symbolically (each element
// is the multiset of rank contributions it holds), with finite slots so deadlocks show.
#pragma once

#include <string>
#include <vector>

#include "comm/schedule/schedule.h"

namespace braid::comm {

struct VerifyOptions {
  int slots = 2;  ///< K per channel. Message size comes from spec.elemsPerPiece (0 = unlimited).
};

/// Empty string when the schedule for `spec` is correct on every rank; otherwise what went wrong
/// (rank, lane, step, element, expected vs found, or the deadlock state).
std::string verifySchedule(const ScheduleSpec& spec, const VerifyOptions& options = {});

/// The same for given programs (one per rank), e.g. hand-made or deliberately broken ones.
std::string verifyPrograms(const ScheduleSpec& spec, const std::vector<RankProgram>& programs,
                           const VerifyOptions& options = {});

}  // namespace braid::comm
