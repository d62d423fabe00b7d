// The communicator's side of the single-copy all-reduce (comm/exec/single_copy.h): the exchange
// of buffer addresses; the mapped form where every rank's buffers are braid::memAlloc ones
// (transport/shared_buffer.h), else this rank's share read through process_vm_readv, the
// "shares reduced" exchange, the other shares; runOp adds the completion exchange after it.
#include <cstdint>
#include <vector>

#include "comm/detail/state.h"
#include "common/log.h"
#include "transport/peer_memory.h"
#include "transport/shared_buffer.h"

namespace braid {
namespace {

// What a rank publishes of one op's buffers: addresses for process_vm_readv, and where they lie
// in a shared allocation (fd -1: not one).
struct Published {
  uint64_t input;
  uint64_t output;
  transport::SharedRange in;
  transport::SharedRange out;
};

}  // namespace

bool CommState::publishAndMap(const comm::ExecArgs& args, size_t count) {
  const size_t bytes = count * dataTypeSize(args.dtype);
  Published mine{reinterpret_cast<uintptr_t>(args.input),
                 reinterpret_cast<uintptr_t>(args.output), {}, {}};
  const bool shared = transport::findShared(args.input, bytes, &mine.in) &&
                      transport::findShared(args.output, bytes, &mine.out);
  std::vector<Published> all(size);
  // Every rank's buffers, under the op's own header: a rank that called something else fails
  // here with kMismatch, as in any schedule.
  comm::ScheduleSpec spec;
  spec.nranks = size;
  spec.shape = Collective::kAllGather;
  spec.family = Algorithm::kOneShot;
  spec.count = sizeof(Published);
  spec.elemsPerPiece = options.slotBytes;
  comm::ExecArgs exchange = args;
  exchange.input = &mine;
  exchange.output = all.data();
  exchange.dtype = DataType::kUint8;
  exchange.op = RedOp::kSum;
  exchange.elemsPerPiece = options.slotBytes;
  exchange.streamOutput = false;
  executor->run(program(spec), exchange);
  bool mapped = shared;
  for (int q = 0; q < size; ++q) {
    comm::PeerBuffers& p = singleCopyPeers[q];
    p.input = all[q].input;
    p.output = all[q].output;
    p.mappedInput = nullptr;
    p.mappedOutput = nullptr;
    if (q == rank) {
      p.mappedInput = static_cast<const char*>(args.input);
      p.mappedOutput = static_cast<char*>(args.output);
      continue;
    }
    if (!mapped) continue;
    std::string why;
    p.mappedInput = sharedMappings.map(p.pid, p.token, all[q].in, &why);
    if (p.mappedInput) p.mappedOutput = sharedMappings.map(p.pid, p.token, all[q].out, &why);
    if (!p.mappedOutput) {
      mapped = false;
      if (all[q].in.fd >= 0 && all[q].out.fd >= 0) {
        BRAID_INFO("rank {}: cannot map rank {}'s buffers (pid {}): {}", rank, q, p.pid, why);
      }
    }
  }
  // All map every peer, or none uses the mapped form.
  return allAgree(args, mapped);
}

void CommState::runSingleCopy(const comm::ExecArgs& args, size_t count) {
  if (publishAndMap(args, count)) {
    singleCopy->reduceToAll(executor->runner(), args, count, rank, singleCopyPeers);
    return;
  }
  singleCopy->reduceShare(executor->runner(), args, count, rank, singleCopyPeers);
  confirmToAll(args);  // every share is reduced (single_copy.h: why this order is safe)
  singleCopy->gatherShares(executor->runner(), args, count, rank, singleCopyPeers);
}

bool CommState::mappedCopyCandidate(Collective coll, size_t bytes) const {
  return singleCopy != nullptr && coll == Collective::kAllReduce && size > 1 &&
         options.algorithm == Algorithm::kAuto && bytes >= options.mappedCopyBytes;
}

bool CommState::runMappedCopy(const comm::ExecArgs& args, size_t count) {
  if (!publishAndMap(args, count)) return false;
  if (!mappedCopyLogged) {
    mappedCopyLogged = true;
    BRAID_INFO("rank {}: all-reduce of {} bytes: the mapped single copy (every rank's buffers "
               "are memAlloc ones, mapped here)",
               rank, count * dataTypeSize(args.dtype));
  }
  singleCopy->reduceToAll(executor->runner(), args, count, rank, singleCopyPeers);
  return true;
}

}  // namespace braid
