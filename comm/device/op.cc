#include "comm/device/op.h"

#include <algorithm>

#include "comm/op_rules.h"
#include "common/error.h"

namespace braid::comm::device {

bool isInPlace(const DeviceOp& d, int rank) {
  return comm::isInPlace(d.coll, d.input, d.output, d.count, rank, dataTypeSize(d.dtype));
}

bool readsInput(const DeviceOp& d, int rank) {
  return d.coll != Collective::kRecv && (d.coll != Collective::kBroadcast || rank == d.root);
}

bool writesOutput(const DeviceOp& d, int rank) {
  return d.coll != Collective::kSend && (d.coll != Collective::kReduce || rank == d.root);
}

void validateOp(const DeviceOp& d, int rank, int size, int device,
                const PointerClassifier& classifier) {
  const char* name = collectiveName(d.coll);
  BRAID_ENFORCE(d.coll != Collective::kBarrier, ErrorCode::kInvalidUsage,
                "rank {}: barrier has no device form (synchronise the stream instead)", rank);
  BRAID_ENFORCE(isValid(d.dtype), ErrorCode::kInvalidUsage, "rank {}: {}: unknown data type {}",
                rank, name, int(d.dtype));
  if (reduces(d.coll)) {
    BRAID_ENFORCE(isValid(d.op), ErrorCode::kInvalidUsage, "rank {}: {}: unknown reduction op {}",
                  rank, name, int(d.op));
  }
  const size_t elem = dataTypeSize(d.dtype);
  size_t inCount, outCount, inBytes = 0, outBytes = 0, scratch;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  BRAID_ENFORCE(!__builtin_mul_overflow(d.count, size_t(size), &scratch) &&
                    !__builtin_mul_overflow(inCount, elem, &inBytes) &&
                    !__builtin_mul_overflow(outCount, elem, &outBytes) &&
                    inBytes < (size_t(1) << 62) && outBytes < (size_t(1) << 62),
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
  }
  if (d.count == 0) return;
  const bool in = readsInput(d, rank), out = writesOutput(d, rank);
  if (in) requireDeviceBuffer(classifier, d.input, inBytes, device, "send", rank, d.coll);
  if (out) requireDeviceBuffer(classifier, d.output, outBytes, device, "receive", rank, d.coll);
  if (in && out && !p2p && !isInPlace(d, rank)) {
    BRAID_ENFORCE(!overlaps(d.input, inBytes, d.output, outBytes), ErrorCode::kInvalidUsage,
                  "rank {}: {} of {} bytes: send and receive buffers overlap without being "
                  "in-place",
                  rank, name, inBytes);
  }
}

Plan planOp(const DeviceOp& d, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds) {
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
  args.streamOutput = false;
  args.header.seq = d.seq;
  args.header.coll = d.coll;
  args.header.dtype = d.dtype;
  args.header.op = reduces(d.coll) ? d.op : RedOp::kSum;
  args.header.count = d.count;
  args.header.pieceBytes = static_cast<uint32_t>(slotBytes);
  if (d.coll == Collective::kSend || d.coll == Collective::kRecv) {
    Step step;
    step.prim = d.coll == Collective::kSend ? Prim::kSend : Prim::kRecv;
    (d.coll == Collective::kSend ? step.sendPeer : step.recvPeer) = d.root;
    step.src = {Buf::kInput, 0};
    step.dst = {Buf::kOutput, 0};
    step.count = d.count;
    plan.program.lanes.push_back(Lane{{step}});
    args.header.coll = Collective::kSend;
    args.header.family = Algorithm::kOneShot;
    args.header.root = -1;
    return plan;
  }
  size_t inCount, outCount;
  bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  ScheduleSpec& spec = plan.spec;
  spec.nranks = size;
  spec.count = d.count;
  spec.elemsPerPiece = args.elemsPerPiece;
  spec.shape = shapeOf(d.coll);
  const Choice choice = choose(tuner, spec.shape, inCount * elem);
  spec.family = choice.family;
  spec.lanes = choice.lanes;
  spec.root = std::max(d.root, 0);
  spec.inPlace = isInPlace(d, rank);
  args.header.family = spec.family;
  args.header.root =
      (d.coll == Collective::kBroadcast || d.coll == Collective::kReduce) ? d.root : -1;
  plan.program = buildProgram(spec, rank);
  return plan;
}

}  // namespace braid::comm::device
