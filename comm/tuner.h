// Algorithm choice: which schedule family runs a collective of a given size, and its lanes.
#pragma once

#include <cstddef>

#include "comm/braid.hpp"
#include "comm/schedule/schedule.h"

namespace braid::comm {

struct TunerConfig {
  int nranks = 1;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  int channels = 1;                     ///< lanes available to rings and chains
  Algorithm forced = Algorithm::kAuto;  ///< BRAID_ALGO / Options::algorithm
};

struct Choice {
  Family family = Family::kRing;
  int lanes = 1;
};

/// Bytes one rank sends to one peer in a direct schedule of `shape` with input `inputBytes`.
size_t directBytesPerPeer(Shape shape, size_t inputBytes, int nranks);

/// Picks the schedule for `shape` with `inputBytes` per rank. A forced algorithm that cannot run
/// this collective (chain all-reduce, a direct exchange larger than the slots) throws
/// kInvalidUsage saying why, never silently falls back.
Choice choose(const TunerConfig& config, Shape shape, size_t inputBytes);

}  // namespace braid::comm
