#include "comm/detail/op_plan.h"

#include <algorithm>
#include <memory>

#include "comm/detail/op_rules.h"
#include "common/error.h"

namespace braid::comm {

namespace {

bool anyNonZero(const std::vector<size_t>& counts) {
  return std::any_of(counts.begin(), counts.end(), [](size_t c) { return c != 0; });
}

// allToAllv's layout checks (validateOp's), and its buffers' extents.
void validateLayout(const OpDesc& d, int rank, int size, size_t* inCount, size_t* outCount) {
  const char* name = collectiveName(d.coll);
  BRAID_ENFORCE(d.layout != nullptr, ErrorCode::kInvalidUsage, "rank {}: {}: no counts given",
                rank, name);
  const PeerLayout& l = *d.layout;
  for (const auto* v : {&l.sendCounts, &l.sendDispls, &l.recvCounts, &l.recvDispls}) {
    BRAID_ENFORCE(v->size() == size_t(size), ErrorCode::kInvalidUsage,
                  "rank {}: {}: {} counts or displacements given for {} ranks", rank, name,
                  v->size(), size);
  }
  BRAID_ENFORCE(layoutExtents(l, inCount, outCount), ErrorCode::kInvalidUsage,
                "rank {}: {}: a block's end (displacement + count) overflows", rank, name);
  BRAID_ENFORCE(l.sendCounts[rank] == l.recvCounts[rank], ErrorCode::kInvalidUsage,
                "rank {}: {}: sends {} elements to itself but receives {} from itself", rank,
                name, l.sendCounts[rank], l.recvCounts[rank]);
  if (d.input == d.output && d.input != nullptr) {
    BRAID_ENFORCE(l.sendCounts == l.recvCounts && l.sendDispls == l.recvDispls,
                  ErrorCode::kInvalidUsage,
                  "rank {}: {} in place (send == recv) of {} elements: send and receive counts "
                  "and displacements must be equal (MPI_IN_PLACE uses the receive ones)",
                  rank, name, *outCount);
  }
}

}  // namespace

bool layoutExtents(const PeerLayout& layout, size_t* inCount, size_t* outCount) {
  auto extent = [](const std::vector<size_t>& counts, const std::vector<size_t>& displs,
                   size_t* end) {
    *end = 0;
    for (size_t q = 0; q < counts.size() && q < displs.size(); ++q) {
      size_t e;
      if (__builtin_add_overflow(displs[q], counts[q], &e)) return false;
      if (counts[q] != 0) *end = std::max(*end, e);
    }
    return true;
  };
  return extent(layout.sendCounts, layout.sendDispls, inCount) &&
         extent(layout.recvCounts, layout.recvDispls, outCount);
}

OpDesc allToAllvOp(const void* in, const size_t* sendCounts, const size_t* sendDispls, void* out,
                   const size_t* recvCounts, const size_t* recvDispls, DataType type, int rank,
                   int size) {
  OpDesc d;
  d.coll = Collective::kAllToAllv;
  d.input = in;
  d.output = out;
  d.dtype = type;
  auto layout = std::make_shared<PeerLayout>();
  const size_t n = size_t(size);
  for (const size_t* a : {sendCounts, sendDispls, recvCounts, recvDispls}) {
    BRAID_ENFORCE(a != nullptr, ErrorCode::kInvalidUsage,
                  "rank {}: alltoallv: a counts or displacements array is null (each needs {} "
                  "entries, one per rank)",
                  rank, n);
  }
  layout->sendCounts.assign(sendCounts, sendCounts + n);
  layout->sendDispls.assign(sendDispls, sendDispls + n);
  layout->recvCounts.assign(recvCounts, recvCounts + n);
  layout->recvDispls.assign(recvDispls, recvDispls + n);
  for (size_t c : layout->sendCounts) d.count += c;  // validateOp checks what overflows
  d.layout = std::move(layout);
  return d;
}

bool readsInput(const OpDesc& d, int rank) {
  if (d.coll == Collective::kAllToAllv) return d.layout && anyNonZero(d.layout->sendCounts);
  const bool rootSends = d.coll == Collective::kBroadcast || d.coll == Collective::kScatter;
  return d.coll != Collective::kRecv && (!rootSends || rank == d.root);
}

bool writesOutput(const OpDesc& d, int rank) {
  if (d.coll == Collective::kAllToAllv) return d.layout && anyNonZero(d.layout->recvCounts);
  const bool rootReceives = d.coll == Collective::kReduce || d.coll == Collective::kGather;
  return d.coll != Collective::kSend && (!rootReceives || rank == d.root);
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
  if (d.coll == Collective::kAllToAllv) {
    validateLayout(d, rank, size, &inCount, &outCount);
  } else {
    bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  }
  BRAID_ENFORCE(!__builtin_mul_overflow(d.count, size_t(size), &scratch) &&
                    !__builtin_mul_overflow(inCount, elem, inBytes) &&
                    !__builtin_mul_overflow(outCount, elem, outBytes) &&
                    *inBytes < (size_t(1) << 62) && *outBytes < (size_t(1) << 62),
                ErrorCode::kInvalidUsage, "rank {}: {}: count {} of {} overflows the byte size",
                rank, name, d.count, dataTypeName(d.dtype));
  const bool p2p = isPointToPoint(d.coll);
  if (isRooted(d.coll)) {
    BRAID_ENFORCE(d.root >= 0 && d.root < size, ErrorCode::kInvalidUsage,
                  "rank {}: {}: root {} is outside 0..{}", rank, name, d.root, size - 1);
  }
  if (d.anySource) {
    BRAID_ENFORCE(d.coll == Collective::kRecv && d.root == kAnySource, ErrorCode::kInvalidUsage,
                  "rank {}: {}: only a recv may take any source", rank, name);
    BRAID_ENFORCE(d.count > 0, ErrorCode::kInvalidUsage,
                  "rank {}: recv from any source (tag {}) of 0 elements: nothing could match it "
                  "(a send of 0 elements sends nothing)",
                  rank, d.tag);
    BRAID_ENFORCE(d.tag >= 0 && uint32_t(d.tag) <= kMaxTag, ErrorCode::kInvalidUsage,
                  "rank {}: recv from any source: tag {} is negative", rank, d.tag);
  } else if (p2p) {
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
  if (inBytes == 0 || outBytes == 0 || isPointToPoint(d.coll)) return;
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
                      : d.anySource                 ? &anyRecv
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
  args.anySource = d.anySource;
  args.header.seq = d.seq;
  args.header.coll = d.coll;
  args.header.dtype = d.dtype;
  args.header.op = reduces(d.coll) ? d.op : RedOp::kSum;
  args.header.count = d.count;
  args.header.pieceBytes = static_cast<uint32_t>(slotBytes);
  size_t inCount, outCount;
  if (d.coll == Collective::kAllToAllv) {
    layoutExtents(*d.layout, &inCount, &outCount);
    // Ranks send different amounts: the header carries no count (each message's size is
    // checked against what the receiver expects from that peer), errors name this rank's.
    args.header.count = 0;
    args.describedBytes = d.count * elem;
  } else {
    bufferCounts(d.coll, d.count, size, &inCount, &outCount);
  }
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
  // Pieces of the chunk the tuner priced: the slot unless it chose a smaller one
  // (TunerConfig::pickChunk). Every rank chooses alike (the settings check compares the inputs),
  // and the header says it, so ranks that disagree anyway fail as a mismatch.
  if (choice.chunkBytes >= elem && choice.chunkBytes < slotBytes) {
    args.elemsPerPiece = choice.chunkBytes / elem;
    spec.elemsPerPiece = args.elemsPerPiece;
    args.header.pieceBytes = static_cast<uint32_t>(args.elemsPerPiece * elem);
  }
  spec.root = std::max(d.root, 0);
  spec.inPlace = isInPlace(d.coll, d.input, d.output, d.count, rank, elem);
  if (d.coll == Collective::kAllToAllv) {
    spec.perPeer = d.layout;
    spec.count = 1;  // the layout says how much; non-zero so a program is built
  }
  args.header.family = spec.family;
  args.header.root = isRooted(d.coll) ? d.root : -1;
  return plan;
}

}  // namespace braid::comm
