// The schedule generators, one file per family (internal to comm/schedule).
#pragma once

#include "comm/schedule/schedule.h"

namespace braid::comm {

/// Ring: allreduce (reduce-scatter + all-gather), reduce-scatter, all-gather; lane l covers part
/// l of the buffer on channel l, odd lanes run the ring backwards so both link directions work.
RankProgram buildRing(const ScheduleSpec& spec, int rank);
/// Direct ("one-shot"): every rank exchanges with every other in one step; for small sizes.
RankProgram buildDirect(const ScheduleSpec& spec, int rank);
/// All-to-all (equal blocks, or spec.perPeer's splits), in or out of place (all_to_all.cc):
/// the pairwise exchange (Algorithm::kPairwise), one peer per step and direction...
RankProgram buildPairwise(const ScheduleSpec& spec, int rank);
/// ...or direct (Algorithm::kOneShot), every peer's block in flight at once.
RankProgram buildDirectAllToAll(const ScheduleSpec& spec, int rank);
/// Chain: pipelined broadcast from the root / reduce towards the root.
RankProgram buildChain(const ScheduleSpec& spec, int rank);
/// Double binary tree all-reduce: lane 2k runs tree 0, lane 2k+1 tree 1 (treeLaneCount lanes),
/// each on its part of the buffer and on channel = lane.
RankProgram buildTree(const ScheduleSpec& spec, int rank);
/// Hierarchical all-reduce over spec.nodeOf; lane l covers part l of the buffer on channel l.
RankProgram buildHier(const ScheduleSpec& spec, int rank);

/// One rank's place in tree `tree` (0 or 1) of the double binary tree over `nranks` ranks.
struct TreeLinks {
  int parent = -1;  ///< -1 at the root
  int children[2] = {-1, -1};
  int nchildren = 0;
};
TreeLinks treeLinks(int nranks, int tree, int rank);
/// Levels of the trees over `nranks` ranks (an upper bound on the depth).
int treeDepth(int nranks);
/// Lanes (and channels) a tree schedule uses for `lanes` requested: an even number, at least 2.
int treeLaneCount(int lanes);

/// Most shards a hierarchical schedule cuts a round into when ranks per node differ.
inline constexpr long kMaxHierShards = 64;
/// The node structure of spec.nodeOf: nodes densely numbered in order of their ids, ranks of a
/// node in rank order, and the shard count (a multiple of every node's size when that is small).
struct NodeLayout {
  std::vector<std::vector<int>> ranksOf;  ///< node -> its ranks, ascending
  std::vector<int> nodeIndex;             ///< rank -> node
  std::vector<int> localIndex;            ///< rank -> position among its node's ranks
  int shards = 1;
};
/// Throws kInvalidUsage when spec.nodeOf has the wrong size.
NodeLayout nodeLayout(const ScheduleSpec& spec);

/// One step; the generators' common vocabulary.
inline Step makeStep(Prim prim, int channel, int recvPeer, int sendPeer, BufRange src, BufRange dst,
                     size_t count, bool finalize = false) {
  Step s;
  s.prim = prim;
  s.channel = channel;
  s.recvPeer = recvPeer;
  s.sendPeer = sendPeer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}
inline BufRange in(size_t offset) { return {Buf::kInput, offset}; }
inline BufRange out(size_t offset) { return {Buf::kOutput, offset}; }

/// Ring (or chain) order for lane `lane`: position -> rank. Even lanes ascend from `first`, odd
/// lanes descend.
int orderAt(int nranks, int lane, int first, int position);
/// Inverse of orderAt: rank -> position.
int positionOf(int nranks, int lane, int first, int rank);

}  // namespace braid::comm
