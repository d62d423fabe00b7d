#include "comm/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/schedule/generators.h"
#include "common/error.h"

namespace braid::comm {

const char* primName(Prim prim) {
  switch (prim) {
    case Prim::kSend:
      return "send";
    case Prim::kRecv:
      return "recv";
    case Prim::kRecvReduce:
      return "recvReduce";
    case Prim::kRecvReduceSend:
      return "recvReduceSend";
    case Prim::kRecvReduceCopySend:
      return "recvReduceCopySend";
    case Prim::kRecvCopySend:
      return "recvCopySend";
    case Prim::kCopy:
      return "copy";
    case Prim::kGatherReduce:
      return "gatherReduce";
  }
  return "?";
}

bool primReceives(Prim prim) { return prim != Prim::kSend && prim != Prim::kCopy; }
bool primSends(Prim prim) {
  return prim == Prim::kSend || prim == Prim::kRecvReduceSend ||
         prim == Prim::kRecvReduceCopySend || prim == Prim::kRecvCopySend;
}
bool primReads(Prim prim) {
  return prim == Prim::kSend || prim == Prim::kRecvReduce || prim == Prim::kRecvReduceSend ||
         prim == Prim::kRecvReduceCopySend || prim == Prim::kCopy || prim == Prim::kGatherReduce;
}
bool primWrites(Prim prim) {
  return prim == Prim::kRecv || prim == Prim::kRecvReduce || prim == Prim::kRecvReduceCopySend ||
         prim == Prim::kRecvCopySend || prim == Prim::kCopy || prim == Prim::kGatherReduce;
}

size_t inputCount(const ScheduleSpec& spec) {
  const bool blocks = spec.shape == Collective::kReduceScatter ||
                      spec.shape == Collective::kAllToAll || spec.shape == Collective::kScatter;
  return blocks ? spec.count * spec.nranks : spec.count;
}

size_t outputCount(const ScheduleSpec& spec) {
  const bool blocks = spec.shape == Collective::kAllGather ||
                      spec.shape == Collective::kAllToAll || spec.shape == Collective::kGather;
  return blocks ? spec.count * spec.nranks : spec.count;
}

bool familySupports(Algorithm family, Collective shape) {
  switch (family) {
    case Algorithm::kRing:
      return shape == Collective::kAllReduce || shape == Collective::kReduceScatter ||
             shape == Collective::kAllGather;
    case Algorithm::kOneShot:
      return isScheduled(shape);
    case Algorithm::kChain:
      return shape == Collective::kBroadcast || shape == Collective::kReduce;
    case Algorithm::kTree:
    case Algorithm::kHier:
    case Algorithm::kSingleCopy:
      return shape == Collective::kAllReduce;
    case Algorithm::kRankOrder:
      return shape == Collective::kAllReduce || shape == Collective::kReduceScatter ||
             shape == Collective::kReduce;
    case Algorithm::kPairwise:
      return shape == Collective::kAllToAll;
  }
  return false;
}

int channelsUsed(Algorithm family, int lanes) {
  if (family == Algorithm::kTree) return treeLaneCount(lanes);
  // Single copy sends only its exchanges, oneshot's; rank order runs the direct family's.
  if (family == Algorithm::kOneShot || family == Algorithm::kSingleCopy ||
      family == Algorithm::kRankOrder || family == Algorithm::kPairwise) {
    return 1;
  }
  return std::max(lanes, 1);
}

RankProgram buildProgram(const ScheduleSpec& spec, int rank) {
  BRAID_ENFORCE(spec.nranks >= 1 && rank >= 0 && rank < spec.nranks, ErrorCode::kInvalidUsage,
                "schedule: rank {} outside 0..{}", rank, spec.nranks - 1);
  BRAID_ENFORCE(familySupports(spec.family, spec.shape), ErrorCode::kInvalidUsage,
                "algorithm '{}' cannot run {}", algorithmName(spec.family), collectiveName(spec.shape));
  BRAID_ENFORCE(spec.lanes >= 1, ErrorCode::kInvalidUsage, "schedule needs at least one lane");
  if (spec.count == 0) return RankProgram{};
  switch (spec.family) {
    case Algorithm::kRing:
      return buildRing(spec, rank);
    case Algorithm::kOneShot:
      return buildDirect(spec, rank);
    case Algorithm::kChain:
      return buildChain(spec, rank);
    case Algorithm::kTree:
      return buildTree(spec, rank);
    case Algorithm::kHier:
      return buildHier(spec, rank);
    case Algorithm::kSingleCopy:
      // Not a program of messages: comm/exec/single_copy.h runs it around two exchanges.
      fail(ErrorCode::kInternal, "schedule: single copy has no message schedule");
    case Algorithm::kRankOrder:
      // Runs the direct family's exchange, all-gather or gather around a local reduction.
      fail(ErrorCode::kInternal, "schedule: rank order is composed of direct schedules");
    case Algorithm::kPairwise:
      return buildPairwise(spec, rank);
  }
  fail(ErrorCode::kInternal, "schedule: unknown family");
}

std::string describe(const RankProgram& program) {
  std::string out;
  for (size_t l = 0; l < program.lanes.size(); ++l) {
    out += fmt::format("lane {}:\n", l);
    for (const Step& s : program.lanes[l].steps) {
      out += fmt::format("  {:<19} ch{} recv<-{:>2} send->{:>2} src={}+{} dst={}+{} count={}{}\n",
                         primName(s.prim), s.channel, s.recvPeer, s.sendPeer,
                         s.src.buf == Buf::kInput ? "in" : "out", s.src.offset,
                         s.dst.buf == Buf::kInput ? "in" : "out", s.dst.offset, s.count,
                         s.finalize ? " finalize" : "");
    }
  }
  return out;
}

}  // namespace braid::comm
