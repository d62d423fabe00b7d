// Chain schedules: a pipelined line through all ranks starting at the root. Broadcast flows away
// from the root, reduce flows towards it; with slot-sized pieces every link is busy at once, so
// large buffers move at link bandwidth whatever the rank count.
#include "comm/schedule/generators.h"

namespace braid::comm {

RankProgram buildChain(const ScheduleSpec& spec, int rank) {
  const int n = spec.nranks;
  RankProgram program;
  for (int lane = 0; lane < spec.lanes; ++lane) {
    const size_t pb = splitBegin(spec.count, spec.lanes, lane);
    const size_t pc = splitBegin(spec.count, spec.lanes, lane + 1) - pb;
    const int pos = positionOf(n, lane, spec.root, rank);
    const int toward = pos > 0 ? orderAt(n, lane, spec.root, pos - 1) : -1;  // nearer the root
    const int away = pos + 1 < n ? orderAt(n, lane, spec.root, pos + 1) : -1;
    Lane l;
    auto add = [&](Prim prim, int recvPeer, int sendPeer, Buf srcBuf, Buf dstBuf, bool fin) {
      l.steps.push_back(
          makeStep(prim, lane, recvPeer, sendPeer, {srcBuf, pb}, {dstBuf, pb}, pc, fin));
    };
    if (spec.shape == Collective::kBroadcast) {
      if (pos == 0) {
        if (!spec.inPlace) add(Prim::kCopy, -1, -1, Buf::kInput, Buf::kOutput, false);
        if (away >= 0) add(Prim::kSend, -1, away, Buf::kInput, Buf::kOutput, false);
      } else if (away >= 0) {
        add(Prim::kRecvCopySend, toward, away, Buf::kInput, Buf::kOutput, false);
      } else {
        add(Prim::kRecv, toward, -1, Buf::kInput, Buf::kOutput, false);
      }
    } else {  // reduce
      if (n == 1) {
        add(Prim::kCopy, -1, -1, Buf::kInput, Buf::kOutput, true);
      } else if (pos == n - 1) {
        add(Prim::kSend, -1, toward, Buf::kInput, Buf::kOutput, false);
      } else if (pos > 0) {
        add(Prim::kRecvReduceSend, away, toward, Buf::kInput, Buf::kOutput, false);
      } else {
        add(Prim::kRecvReduce, away, -1, Buf::kInput, Buf::kOutput, true);
      }
    }
    program.lanes.push_back(std::move(l));
  }
  return program;
}

}  // namespace braid::comm
