// The schedule generators, one file per family (internal to comm/schedule).
#pragma once

#include "comm/schedule/schedule.h"

namespace braid::comm {

/// Ring: allreduce (reduce-scatter + all-gather), reduce-scatter, all-gather; lane l covers part
/// l of the buffer on channel l, odd lanes run the ring backwards so both link directions work.
RankProgram buildRing(const ScheduleSpec& spec, int rank);
/// Direct ("one-shot"): every rank exchanges with every other in one step; for small sizes.
RankProgram buildDirect(const ScheduleSpec& spec, int rank);
/// Chain: pipelined broadcast from the root / reduce towards the root.
RankProgram buildChain(const ScheduleSpec& spec, int rank);

/// One step; the generators' common vocabulary.
inline Step makeStep(Prim prim, int channel, int recvPeer, int sendPeer, BufRange src, BufRange dst,
                     size_t count, bool finalize = false) {
  Step s;
  s.prim = prim;
  s.channel = channel;
  s.recvPeer = recvPeer;
  s.sendPeer = sendPeer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}
inline BufRange in(size_t offset) { return {Buf::kInput, offset}; }
inline BufRange out(size_t offset) { return {Buf::kOutput, offset}; }

/// Ring (or chain) order for lane `lane`: position -> rank. Even lanes ascend from `first`, odd
/// lanes descend.
int orderAt(int nranks, int lane, int first, int position);
/// Inverse of orderAt: rank -> position.
int positionOf(int nranks, int lane, int first, int rank);

}  // namespace braid::comm
