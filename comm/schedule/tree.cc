// Double binary tree all-reduce (Sanders, Speck and Träff; NCCL's "tree"): two binary trees over
// the ranks in which every rank is interior in at most one, each tree reducing then broadcasting
// half of the buffer, so every rank sends and receives about one buffer's worth in each direction
// in O(log n) steps.
//
// Tree 0 is the in-order tree over labels 1..n (rank = label - 1) whose root is the label with the
// most trailing zero bits: odd labels (even ranks) are leaves, even labels (odd ranks) interior.
// Tree 1 is tree 0 shifted by one rank, so its interior nodes are even ranks: complementary.
//
// Each tree runs as one lane on its own channel, piece by piece: item R(i) reduces piece i towards
// the root, item B(i) broadcasts it back. Every rank runs the items in the same order, R(0..lag-1)
// then R(i + lag), B(i) alternating, so the lowest unfinished item can always move (no deadlock
// whatever the slot count), and the broadcast of early pieces overlaps the reduce of later ones.
#include <algorithm>

#include "comm/schedule/generators.h"

namespace braid::comm {

TreeLinks treeLinks(int nranks, int tree, int rank) {
  TreeLinks links;
  if (nranks <= 1) return links;
  const int shift = tree == 0 ? 0 : 1;
  auto rankOf = [&](int label) { return (label - 1 + shift) % nranks; };
  const int label = (rank - shift + nranks) % nranks + 1;
  // Descend from the whole range [1, n] to `label`, tracking the parent.
  int lo = 1, hi = nranks, parent = -1;
  for (;;) {
    // The label of [lo, hi] with the most trailing zeros: its highest set bit pattern.
    int root = hi;
    for (int bit = 1 << 30; bit >= 1; bit >>= 1) {
      int candidate = (hi / bit) * bit;
      if (candidate >= lo) {
        root = candidate;
        break;
      }
    }
    if (root == label) {
      links.parent = parent < 0 ? -1 : rankOf(parent);
      int nc = 0;
      auto childOf = [&](int clo, int chi) {
        if (clo > chi) return;
        for (int bit = 1 << 30; bit >= 1; bit >>= 1) {
          int candidate = (chi / bit) * bit;
          if (candidate >= clo) {
            links.children[nc++] = rankOf(candidate);
            return;
          }
        }
      };
      childOf(lo, root - 1);
      childOf(root + 1, hi);
      links.nchildren = nc;
      return links;
    }
    parent = root;
    if (label < root) {
      hi = root - 1;
    } else {
      lo = root + 1;
    }
  }
}

int treeDepth(int nranks) {
  int depth = 0;
  while ((1 << depth) <= nranks) ++depth;
  return depth;
}

namespace {

// The steps of rank `rank` for one tree on the elements [pb, pe).
Lane treeLane(const ScheduleSpec& spec, int rank, int tree, int channel, size_t pb, size_t pe) {
  Lane lane;
  auto& steps = lane.steps;
  if (pe <= pb) return lane;
  if (spec.nranks == 1) {
    steps.push_back(makeStep(Prim::kCopy, channel, -1, -1, in(pb), out(pb), pe - pb, true));
    return lane;
  }
  const TreeLinks t = treeLinks(spec.nranks, tree, rank);
  const size_t per = spec.elemsPerPiece ? spec.elemsPerPiece : pe - pb;
  const size_t pieces = pieceCount(pe - pb, per);
  auto reduceItem = [&](size_t i) {
    const size_t b = pb + i * per, len = std::min(per, pe - b);
    const bool root = t.parent < 0;
    if (t.nchildren == 0) {
      steps.push_back(makeStep(Prim::kSend, channel, -1, t.parent, in(b), {}, len));
      return;
    }
    if (t.nchildren == 2) {
      // First child into the output, second on top of it.
      steps.push_back(
          makeStep(Prim::kRecvReduce, channel, t.children[0], -1, in(b), out(b), len, false));
    }
    const BufRange src = t.nchildren == 2 ? out(b) : in(b);
    const int last = t.children[t.nchildren - 1];
    if (root) {
      steps.push_back(makeStep(Prim::kRecvReduce, channel, last, -1, src, out(b), len, true));
    } else {
      steps.push_back(makeStep(Prim::kRecvReduceSend, channel, last, t.parent, src, {}, len));
    }
  };
  auto broadcastItem = [&](size_t i) {
    const size_t b = pb + i * per, len = std::min(per, pe - b);
    int first = 0;
    if (t.parent >= 0) {
      if (t.nchildren == 0) {
        steps.push_back(makeStep(Prim::kRecv, channel, t.parent, -1, {}, out(b), len));
        return;
      }
      steps.push_back(
          makeStep(Prim::kRecvCopySend, channel, t.parent, t.children[0], {}, out(b), len));
      first = 1;
    }
    for (int c = first; c < t.nchildren; ++c) {
      steps.push_back(makeStep(Prim::kSend, channel, -1, t.children[c], out(b), {}, len));
    }
  };
  // The broadcast trails the reduce by about one round trip of the tree.
  const size_t lag = std::min(pieces, static_cast<size_t>(2 * treeDepth(spec.nranks)));
  for (size_t i = 0; i < lag; ++i) reduceItem(i);
  for (size_t i = 0; i < pieces; ++i) {
    if (i + lag < pieces) reduceItem(i + lag);
    broadcastItem(i);
  }
  return lane;
}

}  // namespace

int treeLaneCount(int lanes) { return 2 * std::max(1, lanes / 2); }

RankProgram buildTree(const ScheduleSpec& spec, int rank) {
  // Lane 2k runs tree 0 and lane 2k+1 tree 1, each on part of the buffer, on channel = lane.
  const int lanes = treeLaneCount(spec.lanes);
  RankProgram program;
  for (int lane = 0; lane < lanes; ++lane) {
    const size_t pb = splitBegin(spec.count, lanes, lane);
    const size_t pe = splitBegin(spec.count, lanes, lane + 1);
    program.lanes.push_back(treeLane(spec, rank, lane % 2, lane, pb, pe));
  }
  return program;
}

}  // namespace braid::comm
