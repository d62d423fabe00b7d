// Who does what in a parameter-server job, and which slice of the parameters each server holds.
#pragma once

#include <cstddef>

#include "trainer/train/flat_range.h"

namespace braid::trainer::ps {

/// A server's contiguous slice [begin, end) of the flat parameter vector.
using ShardRange = FlatRange;

/// Ranks 0..servers-1 are servers; ranks servers..worldSize-1 are workers, worker index
/// rank - servers (their data shard, like a DDP rank's).
struct PsLayout {
  int servers = 1;
  int worldSize = 2;

  bool isServer(int rank) const { return rank < servers; }
  int workers() const { return worldSize - servers; }
  int workerIndex(int rank) const { return rank - servers; }
  int workerRank(int index) const { return servers + index; }
};

/// Server `server`'s slice of `numParams` float32 parameters: the slices are contiguous and
/// balanced by bytes (every element is 4 bytes, so by elements), sizes differing by at most one.
ShardRange shardOf(size_t numParams, int servers, int server);

}  // namespace braid::trainer::ps
