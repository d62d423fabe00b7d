// Ring schedules (NCCL's shape): reduce-scatter walks each chunk once around the ring, reducing as
// it goes, and the all-gather walks the finished chunks around once more.
#include <algorithm>

#include "comm/schedule/generators.h"

namespace braid::comm {

int orderAt(int nranks, int lane, int first, int position) {
  int offset = (lane % 2 == 0) ? position : nranks - position;
  return (first + offset) % nranks;
}

int positionOf(int nranks, int lane, int first, int rank) {
  int delta = (rank - first + nranks) % nranks;
  return (lane % 2 == 0) ? delta : (nranks - delta) % nranks;
}

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

struct RingLane {
  int n, lane, pos, next, prev;
  RingLane(int nranks, int l, int rank) : n(nranks), lane(l), pos(positionOf(nranks, l, 0, rank)) {
    next = orderAt(n, lane, 0, mod(pos + 1, n));
    prev = orderAt(n, lane, 0, mod(pos - 1, n));
  }
  int rankAt(int position) const { return orderAt(n, lane, 0, mod(position, n)); }
  Step step(Prim prim) const {
    return makeStep(prim, lane, primReceives(prim) ? prev : -1, primSends(prim) ? next : -1, {}, {},
                    0);
  }
};

Step with(Step s, BufRange src, BufRange dst, size_t count, bool finalize = false) {
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

// Rounds: the lane's part is walked in rounds where every chunk is at most one piece, so each
// step moves one slot and a rank is never more than one slot ahead of its neighbour.
size_t perPieceOf(const ScheduleSpec& spec, size_t total) {
  return spec.elemsPerPiece ? spec.elemsPerPiece : (total ? total : 1);
}

// All-reduce: lane l owns [lb, le) of the buffer; each round of n*E elements is cut into n
// chunks, chunk c reduced around the ring and owned by position c.
Lane allReduceLane(const ScheduleSpec& spec, int rank, int lane) {
  const int n = spec.nranks;
  const size_t lb = splitBegin(spec.count, spec.lanes, lane);
  const size_t le = splitBegin(spec.count, spec.lanes, lane + 1);
  Lane result;
  if (n == 1) {
    result.steps.push_back(with(Step{}, in(lb), out(lb), le - lb, true));
    return result;
  }
  RingLane r(n, lane, rank);
  const int p = r.pos;
  auto& steps = result.steps;
  const size_t perPiece = perPieceOf(spec, le - lb);
  const size_t roundSize = perPiece > (le - lb) / n + 1 ? le - lb : perPiece * n;
  for (size_t rb = lb; rb < le; rb += roundSize) {
    const size_t rlen = std::min(roundSize, le - rb);
    auto begin = [&](int c) { return rb + splitBegin(rlen, n, mod(c, n)); };
    auto count = [&](int c) {
      return splitBegin(rlen, n, mod(c, n) + 1) - splitBegin(rlen, n, mod(c, n));
    };
    int c = p - 1;
    steps.push_back(with(r.step(Prim::kSend), in(begin(c)), {}, count(c)));
    for (int s = 1; s <= n - 2; ++s) {
      c = p - 1 - s;
      steps.push_back(with(r.step(Prim::kRecvReduceSend), in(begin(c)), {}, count(c)));
    }
    c = p;
    steps.push_back(
        with(r.step(Prim::kRecvReduceCopySend), in(begin(c)), out(begin(c)), count(c), true));
    for (int s = 1; s <= n - 2; ++s) {
      c = p - s;
      steps.push_back(with(r.step(Prim::kRecvCopySend), {}, out(begin(c)), count(c)));
    }
    c = p + 1;
    steps.push_back(with(r.step(Prim::kRecv), {}, out(begin(c)), count(c)));
  }
  return result;
}

// Reduce-scatter: chunk q of the input (spec.count elements) ends reduced on rank q. Lane l takes
// part l of every chunk, in rounds of one piece.
Lane reduceScatterLane(const ScheduleSpec& spec, int rank, int lane) {
  const int n = spec.nranks;
  const size_t pb = splitBegin(spec.count, spec.lanes, lane);
  const size_t pe = splitBegin(spec.count, spec.lanes, lane + 1);
  Lane result;
  if (n == 1) {
    result.steps.push_back(with(Step{}, in(pb), out(pb), pe - pb, true));
    return result;
  }
  RingLane r(n, lane, rank);
  auto& steps = result.steps;
  const size_t perPiece = perPieceOf(spec, pe - pb);
  for (size_t b = pb; b < pe; b += perPiece) {
    const size_t len = std::min(perPiece, pe - b);
    auto chunkOf = [&](int position) { return r.rankAt(position) * spec.count + b; };
    steps.push_back(with(r.step(Prim::kSend), in(chunkOf(r.pos - 1)), {}, len));
    for (int s = 1; s <= n - 2; ++s) {
      steps.push_back(with(r.step(Prim::kRecvReduceSend), in(chunkOf(r.pos - 1 - s)), {}, len));
    }
    steps.push_back(with(r.step(Prim::kRecvReduce), in(chunkOf(r.pos)), out(b), len, true));
  }
  return result;
}

// All-gather: rank q's input lands in chunk q of every output.
Lane allGatherLane(const ScheduleSpec& spec, int rank, int lane) {
  const int n = spec.nranks;
  const size_t pb = splitBegin(spec.count, spec.lanes, lane);
  const size_t pe = splitBegin(spec.count, spec.lanes, lane + 1);
  Lane result;
  auto& steps = result.steps;
  if (!spec.inPlace) steps.push_back(with(Step{}, in(pb), out(rank * spec.count + pb), pe - pb));
  if (n == 1) return result;
  RingLane r(n, lane, rank);
  const size_t perPiece = perPieceOf(spec, pe - pb);
  for (size_t b = pb; b < pe; b += perPiece) {
    const size_t len = std::min(perPiece, pe - b);
    auto chunkOf = [&](int position) { return r.rankAt(position) * spec.count + b; };
    steps.push_back(with(r.step(Prim::kSend), in(b), {}, len));
    for (int s = 1; s <= n - 2; ++s) {
      steps.push_back(with(r.step(Prim::kRecvCopySend), {}, out(chunkOf(r.pos - s)), len));
    }
    steps.push_back(with(r.step(Prim::kRecv), {}, out(chunkOf(r.pos + 1)), len));
  }
  return result;
}

}  // namespace

RankProgram buildRing(const ScheduleSpec& spec, int rank) {
  RankProgram program;
  for (int lane = 0; lane < spec.lanes; ++lane) {
    switch (spec.shape) {
      case Collective::kAllReduce:
        program.lanes.push_back(allReduceLane(spec, rank, lane));
        break;
      case Collective::kReduceScatter:
        program.lanes.push_back(reduceScatterLane(spec, rank, lane));
        break;
      case Collective::kAllGather:
        program.lanes.push_back(allGatherLane(spec, rank, lane));
        break;
      default:
        break;
    }
  }
  return program;
}

}  // namespace braid::comm
