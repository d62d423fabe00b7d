// The pure half of each collective's descriptor, as nccl-tests has it: name, buffer counts for a
// given size, bus-bandwidth factor, whether it takes an op and a root. The other half (run) lives
// in each binary's main file.
#pragma once

#include <cstddef>

#include "braid/types.hpp"

namespace braid::bench {

/// Element counts of one row (nccl-tests' getCollByteCount).
struct Counts {
  size_t sendCount = 0;   ///< elements in the send buffer
  size_t recvCount = 0;   ///< elements in the receive buffer
  size_t paramCount = 0;  ///< the count passed to the call; the table's count column
  /// In-place: send = base + sendInPlaceOffset * rank, recv = base + recvInPlaceOffset * rank
  /// (elements), where base is the receive buffer.
  size_t sendInPlaceOffset = 0;
  size_t recvInPlaceOffset = 0;
  size_t bytes = 0;  ///< the size column; algbw = bytes / time
};

/// What the driver needs to know about a collective, without running it.
struct CollInfo {
  Collective kind;
  const char* name;  ///< "all_reduce", as nccl-tests' binaries are named
  bool hasOp;        ///< false: the op column says "none" and -o is ignored
  bool hasRoot;      ///< false: the root column says -1 and -r is ignored
  /// Counts for a size in bytes (nccl-tests' convention: size is the total bytes of the larger
  /// buffer, rounded down to whole elements per rank).
  Counts (*counts)(size_t sizeBytes, size_t elemSize, int nranks);
  /// busbw = algbw * busFactor(nranks).
  double (*busFactor)(int nranks);
};

/// The descriptor of one of allReduce, reduceScatter, allGather, broadcast, reduce, allToAll,
/// gather, scatter; throws kInvalidUsage for the others.
const CollInfo& collInfo(Collective kind);

}  // namespace braid::bench
