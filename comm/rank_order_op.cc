// The rank-order reductions (Algorithm::kRankOrder, BRAID_DETERMINISTIC): every element is
// reduced by one rank, over every rank's contribution in rank order (kernels::reduceMany), so the
// result has the same bits as oneshot's and single copy's whatever the chunking, lanes or
// transport. Composed of the direct family's schedules around one local reduction:
//   all-reduce:     each rank's block of the buffer (single copy's split, at 64-byte boundaries)
//                   goes to its owner in one exchange (the direct all-to-all, every block
//                   in flight at once, streaming at any size) into scratch; the owner reduces
//                   it; a second exchange gives every rank every reduced block;
//   reduce-scatter: the first exchange and the reduction;
//   reduce:         a gather at the root (one lane per peer) and the reduction there.
// In place is safe: the first exchange reads blocks this rank does not own and writes scratch;
// the reduction writes only the own block; the second exchange writes the others' blocks, which
// left in the first. runOp adds two completion exchanges (a pair may exchange nothing when the
// buffer is smaller than the ranks' lines), as allToAllv.
#include <algorithm>
#include <memory>
#include <vector>

#include "comm/detail/state.h"
#include "kernels/kernels.h"

namespace braid {
namespace {

struct Blocks {
  std::vector<size_t> lo, hi;
  size_t len(int q) const { return hi[q] - lo[q]; }
};

Blocks blocksOf(size_t count, size_t elem, int n) {
  Blocks b{std::vector<size_t>(n), std::vector<size_t>(n)};
  for (int q = 0; q < n; ++q) comm::SingleCopy::share(count, elem, n, q, &b.lo[q], &b.hi[q]);
  return b;
}

}  // namespace

void CommState::runRankOrder(const OpDesc& d, const comm::ExecArgs& args) {
  const int n = size, r = rank;
  const size_t elem = dataTypeSize(args.dtype);
  const RedOp sum = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  const char* in = static_cast<const char*>(args.input);
  char* out = static_cast<char*>(args.output);
  comm::ExecArgs sub = args;
  sub.streamOutput = false;
  auto exchange = [&](const comm::PeerLayout& layout, const void* from, void* to) {
    comm::ScheduleSpec spec;
    spec.nranks = n;
    spec.shape = Collective::kAllToAll;
    spec.family = Algorithm::kOneShot;
    spec.count = 1;  // the layout says how much
    spec.perPeer = std::make_shared<comm::PeerLayout>(layout);
    spec.elemsPerPiece = args.elemsPerPiece;
    sub.input = from;
    sub.output = to;
    executor->run(program(spec), sub);
  };
  auto reduceInRankOrder = [&](char* dst, const std::vector<const void*>& srcs, size_t len) {
    kernels::reduceMany(dst, srcs.data(), n, len, args.dtype, sum);
    if (args.op == RedOp::kAvg) kernels::divide(dst, dst, len, args.dtype, uint64_t(n));
  };
  std::vector<const void*> srcs(n);
  comm::PeerLayout layout;
  for (auto* v : {&layout.sendCounts, &layout.sendDispls, &layout.recvCounts, &layout.recvDispls})
    v->assign(n, 0);

  if (d.coll == Collective::kReduce) {
    const size_t c = d.count;
    comm::ScheduleSpec spec;
    spec.nranks = n;
    spec.shape = Collective::kGather;
    spec.family = Algorithm::kOneShot;
    spec.count = c;
    spec.root = d.root;
    spec.elemsPerPiece = args.elemsPerPiece;
    if (r == d.root) rankOrderScratch.resize(n * c * elem);
    sub.input = in;
    sub.output = rankOrderScratch.data();
    executor->run(program(spec), sub);
    if (r != d.root) return;
    for (int q = 0; q < n; ++q) srcs[q] = q == r ? in : rankOrderScratch.data() + q * c * elem;
    reduceInRankOrder(out, srcs, c);
    return;
  }

  if (d.coll == Collective::kReduceScatter) {
    const size_t c = d.count;
    rankOrderScratch.resize(n * c * elem);
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      layout.sendCounts[q] = layout.recvCounts[q] = c;
      layout.sendDispls[q] = layout.recvDispls[q] = q * c;
    }
    exchange(layout, in, rankOrderScratch.data());
    for (int q = 0; q < n; ++q) {
      srcs[q] = q == r ? in + r * c * elem : rankOrderScratch.data() + q * c * elem;
    }
    reduceInRankOrder(out, srcs, c);
    return;
  }

  // All-reduce.
  const Blocks b = blocksOf(d.count, elem, n);
  const size_t mine = b.len(r);
  rankOrderScratch.resize(n * mine * elem);
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    layout.sendCounts[q] = b.len(q);
    layout.sendDispls[q] = b.lo[q];
    layout.recvCounts[q] = mine;
    layout.recvDispls[q] = q * mine;
  }
  exchange(layout, in, rankOrderScratch.data());
  for (int q = 0; q < n; ++q) {
    srcs[q] = q == r ? in + b.lo[r] * elem : rankOrderScratch.data() + q * mine * elem;
  }
  reduceInRankOrder(out + b.lo[r] * elem, srcs, mine);
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    layout.sendCounts[q] = mine;
    layout.sendDispls[q] = b.lo[r];
    layout.recvCounts[q] = b.len(q);
    layout.recvDispls[q] = b.lo[q];
  }
  exchange(layout, out, out);
}

}  // namespace braid
