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

// What a rank publishes of one op's buffers: addresses (for process_vm_readv, or used as they are
// by ranks of its process), where they lie in a shared allocation (fd -1: not one), and the epoch
// of its buffer lease (comm/exec/buffer_lease.h; 0: none).
struct Published {
  uint64_t input;
  uint64_t output;
  transport::SharedRange in;
  transport::SharedRange out;
  uint64_t epoch;
};

}  // namespace

bool CommState::publishAndMap(const comm::ExecArgs& args, size_t count) {
  const size_t bytes = count * dataTypeSize(args.dtype);
  Published mine{reinterpret_cast<uintptr_t>(args.input),
                 reinterpret_cast<uintptr_t>(args.output), {}, {}, 0};
  const bool shared = transport::findShared(args.input, bytes, &mine.in) &&
                      transport::findShared(args.output, bytes, &mine.out);
  // Lent before the addresses go out: a peer that knows them knows the epoch too.
  if (ownLease) mine.epoch = ownLease->open();
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
  // The mapped form needs every peer's buffers here: a thread of this process's by address, any
  // other's mapped (and then this rank's own must be mappable by it).
  bool mapped = true;
  for (int q = 0; q < size; ++q) mapped &= q == rank || singleCopyPeers[q].sameProcess;
  mapped |= shared;
  for (int q = 0; q < size; ++q) {
    comm::PeerBuffers& p = singleCopyPeers[q];
    p.input = all[q].input;
    p.output = all[q].output;
    p.epoch = all[q].epoch;
    p.mappedInput = nullptr;
    p.mappedOutput = nullptr;
    if (q == rank || p.sameProcess) {
      p.mappedInput = reinterpret_cast<const char*>(p.input);
      p.mappedOutput = reinterpret_cast<char*>(p.output);
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
  // All map every peer, or none uses the mapped form. Ranks that are all threads of this process
  // agree without asking: every one of them has every address.
  if (peersAreThreads()) return true;
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
         options.algorithm == Algorithm::kAuto &&
         bytes >= (peersThreads ? options.threadMappedCopyBytes : options.mappedCopyBytes);
}

bool CommState::peersAreThreads() const { return singleCopy != nullptr && peersThreads; }

bool CommState::threadCopyCandidate(Collective coll, size_t totalBytes) const {
  // All-gather and broadcast by address are plain copies, which one core does alone (broadcast:
  // only the receivers); the ring shares that work between the ranks' cores and measured as fast
  // from 16 MiB and faster at 256 MiB (bench/RESULTS.md, "Ranks as threads"), so they stop below
  // 8 MiB. Reduce-scatter by address won at every size.
  constexpr size_t kCopiesUpTo = 8 << 20;
  if (!peersAreThreads() || size < 2 || options.algorithm != Algorithm::kAuto ||
      totalBytes < options.threadMappedCopyBytes) {
    return false;
  }
  if (coll == Collective::kReduceScatter) return true;
  return (coll == Collective::kAllGather || coll == Collective::kBroadcast) &&
         totalBytes < kCopiesUpTo;
}

void CommState::runThreadCopy(const OpDesc& d, const comm::ExecArgs& args) {
  publishAndMap(args, d.count);  // true between threads: every address is ours
  switch (d.coll) {
    case Collective::kAllGather:
      singleCopy->allGatherFrom(executor->runner(), args, d.count, rank, singleCopyPeers);
      return;
    case Collective::kReduceScatter:
      singleCopy->reduceScatterFrom(executor->runner(), args, d.count, rank, singleCopyPeers);
      return;
    case Collective::kBroadcast:
      singleCopy->broadcastFrom(executor->runner(), args, d.count, d.root, rank, singleCopyPeers);
      return;
    default:
      fail(ErrorCode::kInternal, "rank {}: {} has no copy by address", rank,
           collectiveName(d.coll));
  }
}

bool CommState::runMappedCopy(const comm::ExecArgs& args, size_t count) {
  if (!publishAndMap(args, count)) return false;
  if (!mappedCopyLogged) {
    mappedCopyLogged = true;
    BRAID_INFO("rank {}: all-reduce of {} bytes: the mapped single copy (every rank's buffers "
               "are here: memAlloc ones mapped, or a thread's of this process)",
               rank, count * dataTypeSize(args.dtype));
  }
  singleCopy->reduceToAll(executor->runner(), args, count, rank, singleCopyPeers);
  return true;
}

}  // namespace braid
