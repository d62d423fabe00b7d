#include "bench/format/colls.h"

#include "common/error.h"

namespace braid::bench {
namespace {

Counts allReduceCounts(size_t sizeBytes, size_t elemSize, int nranks) {
  Counts c;
  c.sendCount = c.recvCount = c.paramCount = sizeBytes / elemSize;
  c.bytes = c.paramCount * elemSize;
  return c;
}

// reduce_scatter: size = recvCount * nranks * elemSize (the send buffer).
Counts reduceScatterCounts(size_t sizeBytes, size_t elemSize, int nranks) {
  Counts c;
  size_t perRank = sizeBytes / elemSize / nranks;
  c.sendCount = perRank * nranks;
  c.recvCount = c.paramCount = perRank;
  c.recvInPlaceOffset = perRank;
  c.bytes = c.sendCount * elemSize;
  return c;
}

// all_gather: size = sendCount * nranks * elemSize (the receive buffer).
Counts allGatherCounts(size_t sizeBytes, size_t elemSize, int nranks) {
  Counts c;
  size_t perRank = sizeBytes / elemSize / nranks;
  c.sendCount = c.paramCount = perRank;
  c.recvCount = perRank * nranks;
  c.sendInPlaceOffset = perRank;
  c.bytes = c.recvCount * elemSize;
  return c;
}

// alltoall: size = count * nranks * elemSize (either buffer); in place at the same address.
Counts allToAllCounts(size_t sizeBytes, size_t elemSize, int nranks) {
  Counts c;
  c.paramCount = sizeBytes / elemSize / nranks;
  c.sendCount = c.recvCount = c.paramCount * nranks;
  c.bytes = c.sendCount * elemSize;
  return c;
}

double allReduceFactor(int nranks) { return 2.0 * (nranks - 1) / nranks; }
double gatherScatterFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }
double unitFactor(int) { return 1.0; }

const CollInfo kAllReduce{Collective::kAllReduce, "all_reduce",   true, false,
                          allReduceCounts,        allReduceFactor};
const CollInfo kReduceScatter{Collective::kReduceScatter, "reduce_scatter",   true, false,
                              reduceScatterCounts,        gatherScatterFactor};
const CollInfo kAllGather{Collective::kAllGather, "all_gather",       false, false,
                          allGatherCounts,        gatherScatterFactor};
const CollInfo kBroadcast{Collective::kBroadcast, "broadcast", false, true,
                          allReduceCounts,        unitFactor};
const CollInfo kReduce{Collective::kReduce, "reduce", true, true, allReduceCounts, unitFactor};
// nccl-tests' alltoall, gather and scatter: busbw = algbw * (n-1)/n, gather's counts as
// all_gather's, scatter's as reduce_scatter's (the larger buffer is the size).
const CollInfo kAllToAll{Collective::kAllToAll, "alltoall",         false, false,
                         allToAllCounts,        gatherScatterFactor};
const CollInfo kGather{Collective::kGather, "gather", false, true, allGatherCounts,
                       gatherScatterFactor};
const CollInfo kScatter{Collective::kScatter, "scatter", false, true, reduceScatterCounts,
                        gatherScatterFactor};

}  // namespace

const CollInfo& collInfo(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce:
      return kAllReduce;
    case Collective::kReduceScatter:
      return kReduceScatter;
    case Collective::kAllGather:
      return kAllGather;
    case Collective::kBroadcast:
      return kBroadcast;
    case Collective::kReduce:
      return kReduce;
    case Collective::kAllToAll:
      return kAllToAll;
    case Collective::kGather:
      return kGather;
    case Collective::kScatter:
      return kScatter;
    default:
      break;
  }
  fail(ErrorCode::kInvalidUsage, "bench: collective {} has no perf descriptor",
       static_cast<int>(kind));
}

}  // namespace braid::bench
