// The communicator's side of the single-copy all-reduce (comm/exec/single_copy.h): the exchange
// of buffer addresses, this rank's share, the "shares reduced" exchange, the other shares;
// runOp adds the completion exchange after it.
#include <cstdint>
#include <vector>

#include "comm/detail/state.h"

namespace braid {

void CommState::runSingleCopy(const comm::ExecArgs& args, size_t count) {
  struct Buffers {
    uint64_t input;
    uint64_t output;
  };
  const Buffers mine{reinterpret_cast<uintptr_t>(args.input),
                     reinterpret_cast<uintptr_t>(args.output)};
  std::vector<Buffers> all(size);
  // Every rank's addresses, under the op's own header: a rank that called something else fails
  // here with kMismatch, as in any schedule.
  comm::ScheduleSpec spec;
  spec.nranks = size;
  spec.shape = Collective::kAllGather;
  spec.family = Algorithm::kOneShot;
  spec.count = sizeof(Buffers);
  spec.elemsPerPiece = options.slotBytes;
  comm::ExecArgs exchange = args;
  exchange.input = &mine;
  exchange.output = all.data();
  exchange.dtype = DataType::kUint8;
  exchange.op = RedOp::kSum;
  exchange.elemsPerPiece = options.slotBytes;
  exchange.streamOutput = false;
  executor->run(program(spec), exchange);
  for (int q = 0; q < size; ++q) {
    singleCopyPeers[q].input = all[q].input;
    singleCopyPeers[q].output = all[q].output;
  }
  singleCopy->reduceShare(executor->runner(), args, count, rank, singleCopyPeers);
  confirmToAll(args);  // every share is reduced (single_copy.h: why this order is safe)
  singleCopy->gatherShares(executor->runner(), args, count, rank, singleCopyPeers);
}

}  // namespace braid
