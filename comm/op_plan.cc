#include "comm/detail/op_plan.h"

#include <algorithm>

#include "comm/detail/op_rules.h"
#include "common/error.h"

namespace braid::comm {

bool readsInput(const OpDesc& d, int rank) {
  return d.coll != Collective::kRecv && (d.coll != Collective::kBroadcast || rank == d.root);
}

bool writesOutput(const OpDesc& d, int rank) {
  return d.coll != Collective::kSend && (d.coll != Collective::kReduce || rank == d.root);
}

void validateOp(const OpDesc& d, int rank, int size, size_t* inBytes, size_t* outBytes) {
  const char* name = collectiveName(d.coll);
  BRAID_ENFORCE(isValid(d.dtype), ErrorCode::kInvalidUsage, "rank {}: {}: unknown data type {}",
                rank, name, int(d.dtype));
  if (reduces(d.coll)) {
    BRAID_ENFORCE(isValid(d.op), ErrorCode::kInvalidUsage, "rank {}: {}: unknown reduction op {}",
                  rank, name, int(d.op));
  }
  const size_t elem = dataTypeSize(d.dtype);
  size_t inCount, outCount, scratch;
  *inBytes = *outBytes = 0;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  BRAID_ENFORCE(!__builtin_mul_overflow(d.count, size_t(size), &scratch) &&
                    !__builtin_mul_overflow(inCount, elem, inBytes) &&
                    !__builtin_mul_overflow(outCount, elem, outBytes) &&
                    *inBytes < (size_t(1) << 62) && *outBytes < (size_t(1) << 62),
                ErrorCode::kInvalidUsage, "rank {}: {}: count {} of {} overflows the byte size",
                rank, name, d.count, dataTypeName(d.dtype));
  const bool rooted = d.coll == Collective::kBroadcast || d.coll == Collective::kReduce;
  const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
  if (rooted) {
    BRAID_ENFORCE(d.root >= 0 && d.root < size, ErrorCode::kInvalidUsage,
                  "rank {}: {}: root {} is outside 0..{}", rank, name, d.root, size - 1);
  }
  if (p2p) {
    BRAID_ENFORCE(d.root >= 0 && d.root < size && d.root != rank, ErrorCode::kInvalidUsage,
                  "rank {}: {}: peer {} must be another rank in 0..{}", rank, name, d.root,
                  size - 1);
    BRAID_ENFORCE(d.tag >= 0 && uint32_t(d.tag) <= kMaxTag, ErrorCode::kInvalidUsage,
                  "rank {}: {} to/from peer {}: tag {} is negative", rank, name, d.root, d.tag);
  } else {
    BRAID_ENFORCE(d.tag == 0, ErrorCode::kInvalidUsage, "rank {}: {}: tag {} on a collective", rank,
                  name, d.tag);
  }
}

void requireNoOverlap(const OpDesc& d, int rank, size_t inBytes, size_t outBytes) {
  if (d.count == 0 || d.coll == Collective::kSend || d.coll == Collective::kRecv) return;
  if (!readsInput(d, rank) || !writesOutput(d, rank)) return;
  if (isInPlace(d.coll, d.input, d.output, d.count, rank, dataTypeSize(d.dtype))) return;
  BRAID_ENFORCE(!overlaps(d.input, inBytes, d.output, outBytes), ErrorCode::kInvalidUsage,
                "rank {}: {} of {} bytes: send and receive buffers overlap without being "
                "in-place",
                rank, collectiveName(d.coll), inBytes);
}

uint64_t* OpNumbering::number(OpDesc& d) {
  d.collectivesBefore = coll;
  uint64_t* counter = d.coll == Collective::kSend   ? &send[d.root]
                      : d.coll == Collective::kRecv ? &recv[d.root]
                                                    : &coll;
  d.seq = *counter;
  return counter;
}

Plan planOp(const OpDesc& d, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds, size_t streamBytes) {
  const size_t elem = dataTypeSize(d.dtype);
  Plan plan;
  ExecArgs& args = plan.args;
  args.input = d.input;
  args.output = d.output;
  args.dtype = d.dtype;
  args.op = d.op;
  args.timeoutSeconds = timeoutSeconds;
  args.elemsPerPiece = slotBytes / elem;
  args.called = d.coll;
  args.collectivesBefore = d.collectivesBefore;
  args.header.seq = d.seq;
  args.header.coll = d.coll;
  args.header.dtype = d.dtype;
  args.header.op = reduces(d.coll) ? d.op : RedOp::kSum;
  args.header.count = d.count;
  args.header.pieceBytes = static_cast<uint32_t>(slotBytes);
  size_t inCount, outCount;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  args.streamOutput = outCount * elem >= streamBytes;
  plan.inBytes = inCount * elem;
  if (d.coll == Collective::kSend || d.coll == Collective::kRecv) {
    // Point-to-point: one step on channel 0; the header says "send" on both sides.
    Step step;
    step.prim = d.coll == Collective::kSend ? Prim::kSend : Prim::kRecv;
    (d.coll == Collective::kSend ? step.sendPeer : step.recvPeer) = d.root;
    step.src = {Buf::kInput, 0};
    step.dst = {Buf::kOutput, 0};
    step.count = d.count;
    plan.p2p.lanes.push_back(Lane{{step}});
    plan.isP2p = true;
    args.header.coll = Collective::kSend;
    args.header.family = Algorithm::kOneShot;
    args.header.root = -1;
    args.header.tag = uint32_t(d.tag);
    return plan;
  }
  ScheduleSpec& spec = plan.spec;
  spec.nranks = size;
  spec.count = d.count;
  spec.elemsPerPiece = args.elemsPerPiece;
  if (d.coll == Collective::kBarrier) {
    // A one-byte max all-reduce; the caller supplies the byte buffers.
    spec.shape = Collective::kAllReduce;
    spec.family = Algorithm::kOneShot;
    spec.count = 1;
    args.dtype = DataType::kUint8;
    args.op = RedOp::kMax;
    args.elemsPerPiece = slotBytes;
    args.streamOutput = false;
    spec.elemsPerPiece = args.elemsPerPiece;
    args.header.dtype = DataType::kUint8;
    args.header.count = 0;
    args.header.family = spec.family;
    args.header.root = -1;
    return plan;
  }
  spec.shape = shapeOf(d.coll);
  const Choice choice = choose(tuner, spec.shape, inCount * elem);
  spec.family = choice.family;
  spec.lanes = choice.lanes;
  spec.root = std::max(d.root, 0);
  spec.inPlace = isInPlace(d.coll, d.input, d.output, d.count, rank, elem);
  args.header.family = spec.family;
  args.header.root =
      (d.coll == Collective::kBroadcast || d.coll == Collective::kReduce) ? d.root : -1;
  return plan;
}

}  // namespace braid::comm
