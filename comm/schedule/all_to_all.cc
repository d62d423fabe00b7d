// All-to-all (equal blocks, or allToAllv's per-peer splits), two shapes:
//
// Pairwise exchange (Algorithm::kPairwise): at step k rank r sends its block for rank r+k and
// receives rank r-k's block, so every step each rank sends to one peer and receives from another,
// and over n-1 steps every pair meets once: no rank (no NIC, no switch port) is flooded by all the
// others at once. One lane alternates a piece sent and a piece received, so step k+1 begins only
// once rank r-k's block has arrived.
//
// Direct (Algorithm::kOneShot): one lane per peer and direction, so every block is in flight at
// once; a receiver takes whichever arrives first instead of waiting for them in order.
//
// allToAllv: a pair whose count is 0 still exchanges one empty message (Step::emptyMessage), so a
// rank that sends nothing where its peer expects bytes (or the reverse) is a named mismatch.
//
// In place (MPI_IN_PLACE's all-to-all), both shapes: a block must leave before its peer's block
// lands on it. Ranks pair up symmetrically (step k: r with k-r mod n, one pair per step), and
// within a pair each slot-sized piece is sent before the peer's piece is received into the same
// place; one lane, one piece in flight per pair and direction, never more than a slot ahead.
#include <algorithm>
#include <cstdint>

#include "comm/schedule/generators.h"

namespace braid::comm {
namespace {

// This rank's split towards or from peer q: counts and displacements in elements.
struct Split {
  const ScheduleSpec& spec;
  size_t sendCount(int q) const { return spec.perPeer ? spec.perPeer->sendCounts[q] : spec.count; }
  size_t sendDispl(int q) const {
    return spec.perPeer ? spec.perPeer->sendDispls[q] : q * spec.count;
  }
  size_t recvCount(int q) const { return spec.perPeer ? spec.perPeer->recvCounts[q] : spec.count; }
  size_t recvDispl(int q) const {
    return spec.perPeer ? spec.perPeer->recvDispls[q] : q * spec.count;
  }
};

Step sendTo(const Split& split, int q) {
  Step s = makeStep(Prim::kSend, 0, -1, q, in(split.sendDispl(q)), {}, split.sendCount(q));
  s.emptyMessage = s.count == 0;
  return s;
}

Step recvFrom(const Split& split, int q) {
  Step s = makeStep(Prim::kRecv, 0, q, -1, {}, out(split.recvDispl(q)), split.recvCount(q));
  s.emptyMessage = s.count == 0;
  return s;
}

// This rank's own block, copied last: the peers take the sent blocks out of the slots meanwhile.
void copyOwn(const Split& split, int rank, Lane* lane) {
  if (split.sendCount(rank) == 0) return;
  lane->steps.push_back(makeStep(Prim::kCopy, 0, -1, -1, in(split.sendDispl(rank)),
                                 out(split.recvDispl(rank)), split.sendCount(rank)));
}

RankProgram inPlace(const ScheduleSpec& spec, int rank) {
  const int n = spec.nranks;
  const Split split{spec};
  Lane lane;
  const size_t per = spec.elemsPerPiece ? spec.elemsPerPiece : SIZE_MAX;
  for (int k = 0; k < n; ++k) {
    const int q = ((k - rank) % n + n) % n;
    if (q == rank) continue;  // this rank's own block stays where it is
    const size_t count = split.recvCount(q), at = split.recvDispl(q);
    if (count == 0) {
      lane.steps.push_back(sendTo(split, q));
      lane.steps.push_back(recvFrom(split, q));
    }
    for (size_t b = 0; b < count; b += per) {
      const size_t len = std::min(per, count - b);
      lane.steps.push_back(makeStep(Prim::kSend, 0, -1, q, in(at + b), {}, len));
      lane.steps.push_back(makeStep(Prim::kRecv, 0, q, -1, {}, out(at + b), len));
    }
  }
  RankProgram program;
  if (!lane.steps.empty()) program.lanes.push_back(std::move(lane));
  return program;
}

}  // namespace

RankProgram buildPairwise(const ScheduleSpec& spec, int rank) {
  if (spec.inPlace) return inPlace(spec, rank);
  const int n = spec.nranks;
  const Split split{spec};
  const size_t per = spec.elemsPerPiece ? spec.elemsPerPiece : SIZE_MAX;
  Lane lane;
  for (int k = 1; k < n; ++k) {
    const int to = (rank + k) % n, from = (rank - k + n) % n;
    const Step send = sendTo(split, to), recv = recvFrom(split, from);
    const size_t sends = std::max<size_t>(pieceCount(send.count, per), 1);
    const size_t recvs = std::max<size_t>(pieceCount(recv.count, per), 1);
    // Piece by piece, a send to `to` then a receive from `from`: the step ends when this rank
    // has its block, so at most one peer's block (and the slots' worth of the one before) is
    // in flight from each rank.
    for (size_t i = 0; i < std::max(sends, recvs); ++i) {
      for (const Step* whole : {&send, &recv}) {
        if (i >= (whole == &send ? sends : recvs)) continue;
        Step piece = *whole;
        const size_t begin = i * per;
        piece.count = whole->count == 0 ? 0 : std::min(per, whole->count - begin);
        (whole == &send ? piece.src : piece.dst).offset += begin;
        lane.steps.push_back(piece);
      }
    }
  }
  copyOwn(split, rank, &lane);
  RankProgram program;
  if (!lane.steps.empty()) program.lanes.push_back(std::move(lane));
  return program;
}

RankProgram buildDirectAllToAll(const ScheduleSpec& spec, int rank) {
  if (spec.inPlace) return inPlace(spec, rank);
  const int n = spec.nranks;
  const Split split{spec};
  RankProgram program;
  for (int k = 1; k < n; ++k) {
    program.lanes.push_back(Lane{{sendTo(split, (rank + k) % n)}});
    program.lanes.push_back(Lane{{recvFrom(split, (rank - k + n) % n)}});
  }
  // The own block's copy after the first send, on its lane: one lane fewer to sweep.
  if (program.lanes.empty()) program.lanes.emplace_back();
  copyOwn(split, rank, &program.lanes.front());
  if (program.lanes.front().steps.empty()) program.lanes.clear();
  return program;
}

}  // namespace braid::comm
