// All-to-all by pairwise exchange: at step k rank r sends its block for rank r+k and receives
// rank r-k's block for it, so each step every rank sends to one peer and receives from another,
// and over n-1 steps every pair meets once (no rank is flooded by all others at once).
//
// Out of place: one lane sends (r+1, r+2, ...), another receives (r-1, r-2, ...) on the same
// channel, so sends and receives stream side by side through the slots at any size.
// In place (MPI_IN_PLACE's all-to-all): a block must leave before its peer's block lands on it.
// Ranks pair up symmetrically (step k: r with k-r mod n, one pair per step), and within a pair
// each slot-sized piece is sent before the peer's piece is received into the same place; one
// lane, one piece in flight per pair and direction, never more than a slot ahead.
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

}  // namespace

RankProgram buildPairwise(const ScheduleSpec& spec, int rank) {
  const int n = spec.nranks;
  const Split split{spec};
  RankProgram program;
  if (spec.inPlace) {
    Lane lane;
    const size_t per = spec.elemsPerPiece ? spec.elemsPerPiece : SIZE_MAX;
    for (int k = 0; k < n; ++k) {
      const int q = ((k - rank) % n + n) % n;
      if (q == rank) continue;  // this rank's own block stays where it is
      const size_t count = split.recvCount(q), at = split.recvDispl(q);
      for (size_t b = 0; b < count; b += per) {
        const size_t len = std::min(per, count - b);
        lane.steps.push_back(makeStep(Prim::kSend, 0, -1, q, in(at + b), {}, len));
        lane.steps.push_back(makeStep(Prim::kRecv, 0, q, -1, {}, out(at + b), len));
      }
    }
    if (!lane.steps.empty()) program.lanes.push_back(std::move(lane));
    return program;
  }
  Lane sends, recvs;
  for (int k = 1; k < n; ++k) {
    const int to = (rank + k) % n, from = (rank - k + n) % n;
    if (split.sendCount(to) > 0) {
      sends.steps.push_back(
          makeStep(Prim::kSend, 0, -1, to, in(split.sendDispl(to)), {}, split.sendCount(to)));
    }
    if (split.recvCount(from) > 0) {
      recvs.steps.push_back(makeStep(Prim::kRecv, 0, from, -1, {}, out(split.recvDispl(from)),
                                     split.recvCount(from)));
    }
  }
  // The own block last: the peers take the sent blocks out of the slots meanwhile.
  if (split.sendCount(rank) > 0) {
    sends.steps.push_back(makeStep(Prim::kCopy, 0, -1, -1, in(split.sendDispl(rank)),
                                   out(split.recvDispl(rank)), split.sendCount(rank)));
  }
  for (Lane* lane : {&sends, &recvs})
    if (!lane->steps.empty()) program.lanes.push_back(std::move(*lane));
  return program;
}

}  // namespace braid::comm
