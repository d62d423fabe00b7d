// Direct ("one-shot") schedules: each rank sends what every other rank needs straight to it, then
// receives and reduces all of it in one pass. One exchange: the latency-optimal choice for small
// buffers. One lane: the sends come first, so in-place buffers are read before they are written.
// Gather and scatter: the root receives from (sends to) every other rank, one lane per peer so
// every peer streams at once whatever the size; all-to-all has a file of its own (all_to_all.cc).
#include "comm/schedule/generators.h"
#include "common/error.h"

namespace braid::comm {
namespace {

Step make(Prim prim, int recvPeer, int sendPeer, BufRange src, BufRange dst, size_t count,
          bool finalize = false) {
  return makeStep(prim, 0, recvPeer, sendPeer, src, dst, count, finalize);
}

}  // namespace

RankProgram buildDirect(const ScheduleSpec& spec, int rank) {
  if (spec.shape == Collective::kAllToAll) return buildDirectAllToAll(spec, rank);
  const int n = spec.nranks;
  const size_t count = spec.count;
  RankProgram program;
  program.lanes.resize(1);
  auto& steps = program.lanes[0].steps;
  std::vector<Lane> perPeer;  // gather's and scatter's root: one lane per other rank
  auto others = [&](auto&& fn) {
    for (int k = 1; k < n; ++k) fn((rank + k) % n);
  };
  switch (spec.shape) {
    case Collective::kAllReduce:
      others([&](int q) { steps.push_back(make(Prim::kSend, -1, q, in(0), {}, count)); });
      steps.push_back(
          make(n == 1 ? Prim::kCopy : Prim::kGatherReduce, -1, -1, in(0), out(0), count, true));
      break;
    case Collective::kReduceScatter:
      others([&](int q) { steps.push_back(make(Prim::kSend, -1, q, in(q * count), {}, count)); });
      steps.push_back(make(n == 1 ? Prim::kCopy : Prim::kGatherReduce, -1, -1, in(rank * count),
                           out(0), count, true));
      break;
    case Collective::kAllGather:
      others([&](int q) { steps.push_back(make(Prim::kSend, -1, q, in(0), {}, count)); });
      if (!spec.inPlace)
        steps.push_back(make(Prim::kCopy, -1, -1, in(0), out(rank * count), count));
      for (int q = 0; q < n; ++q) {
        if (q != rank) steps.push_back(make(Prim::kRecv, q, -1, {}, out(q * count), count));
      }
      break;
    case Collective::kBroadcast:
      if (rank == spec.root) {
        others([&](int q) { steps.push_back(make(Prim::kSend, -1, q, in(0), {}, count)); });
        if (!spec.inPlace) steps.push_back(make(Prim::kCopy, -1, -1, in(0), out(0), count));
      } else {
        steps.push_back(make(Prim::kRecv, spec.root, -1, {}, out(0), count));
      }
      break;
    case Collective::kReduce:
      if (rank == spec.root) {
        steps.push_back(
            make(n == 1 ? Prim::kCopy : Prim::kGatherReduce, -1, -1, in(0), out(0), count, true));
      } else {
        steps.push_back(make(Prim::kSend, -1, spec.root, in(0), {}, count));
      }
      break;
    case Collective::kGather:
      if (rank != spec.root) {
        steps.push_back(make(Prim::kSend, -1, spec.root, in(0), {}, count));
        break;
      }
      if (!spec.inPlace) steps.push_back(make(Prim::kCopy, -1, -1, in(0), out(rank * count), count));
      others([&](int q) {
        perPeer.push_back(Lane{{make(Prim::kRecv, q, -1, {}, out(q * count), count)}});
      });
      break;
    case Collective::kScatter:
      if (rank != spec.root) {
        steps.push_back(make(Prim::kRecv, spec.root, -1, {}, out(0), count));
        break;
      }
      if (!spec.inPlace) steps.push_back(make(Prim::kCopy, -1, -1, in(rank * count), out(0), count));
      others([&](int q) {
        perPeer.push_back(Lane{{make(Prim::kSend, -1, q, in(q * count), {}, count)}});
      });
      break;
    default:
      fail(ErrorCode::kInvalidUsage, "direct: no schedule for {}", collectiveName(spec.shape));
  }
  if (perPeer.empty()) {
    if (steps.empty()) program.lanes.clear();  // in place on one rank: nothing to do
    return program;
  }
  // The root's own block (lane 0) after the peers' lanes: they start first.
  if (!steps.empty()) perPeer.push_back(std::move(program.lanes[0]));
  program.lanes = std::move(perPeer);
  return program;
}

}  // namespace braid::comm
