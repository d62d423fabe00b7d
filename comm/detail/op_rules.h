// Facts about a collective call that the host path (communicator.cc) and the device path
// (comm/device) both need: its schedule shape, buffer sizes, in-place test, overlap test.
#pragma once

#include <cstddef>

#include "braid/braid.hpp"
#include "comm/schedule/schedule.h"

namespace braid::comm {

/// The schedule shape computing `coll` (send, recv and barrier run as all-reduce shapes).
Collective shapeOf(Collective coll);
/// How many completion exchanges end `coll` (every rank confirms to every other, headers
/// checked), so that a rank that disagrees about the call makes it fail on every rank instead
/// of succeeding on some. One where a rank may finish without anything having passed through
/// every other rank: broadcast's root only sends, reduce's non-roots only forward towards the
/// root, gather's non-roots only send and scatter's only receive from the root. Two for
/// allToAllv: a pair may exchange nothing (zero counts), and a rank that expected nothing from a
/// peer meets the peer's unexpected data only in the first exchange, after its own confirmation
/// left; the second, which it then never confirms, holds every rank until its failure arrives.
/// The other collectives need none (0): every rank's output depends on every rank's input,
/// which reaches it only through ranks that checked the header (all-to-all: a block from every
/// peer).
int completionExchanges(Collective coll);
/// Whether the byte ranges [a, a + aBytes) and [b, b + bBytes) intersect.
bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes);
/// Elements of the input and output buffers one rank of `size` passes for `count` (allToAllv's
/// come from its layout: op_plan.h's layoutExtents).
void bufferCounts(Collective coll, size_t count, int size, size_t* in, size_t* out);
/// Whether this rank's call is in place: the output is the input (reduce-scatter and scatter:
/// the input's rank-th block is the output; all-gather and gather: the output's rank-th block is
/// the input; all-to-all: send == recv, as MPI_IN_PLACE).
bool isInPlace(Collective coll, const void* input, const void* output, size_t count, int rank,
               size_t elemBytes);

}  // namespace braid::comm
