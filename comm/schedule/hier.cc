// Hierarchical all-reduce: intra-node reduce-scatter, inter-node all-reduce of every shard (a
// ring through the ranks that hold that shard, one per node), intra-node all-gather.
//
// Shards: the buffer (per round) is cut into S shards, S = lcm of the ranks per node when that is
// small (every rank of a node owns equally many), else the largest node size. Local rank j of a
// node of m ranks owns shards j, j+m, j+2m, ...: so the node's reduce-scatter is a sequence of
// ordinary rings over "groups" of m consecutive shards (one shard per local rank, one piece per
// step), and the inter-node rings of a rank's shards, run in shard order, interleave across ranks
// (with 2+3 ranks the six rings form three waves, not a chain of six).
//
// Rounds: each lane walks its part of the buffer in rounds whose shards are at most one piece, so
// every ring step moves one slot. Rounds are software-pipelined: stage u runs the reduce-scatter
// of round u, the inter-node rings of round u-1 and the all-gather of round u-2, so inter-node
// bytes of one round are in flight while the node works on its neighbours.
//
// Deadlock freedom: every rank runs the phases (a group ring on its node, a shard ring) in one
// global order, and each phase alone needs at most one slot per channel, so the lowest unfinished
// phase can always move. One channel per lane suffices: the phases that share a (peer, channel)
// use it in the same order on both sides.
#include <algorithm>
#include <map>
#include <numeric>

#include "comm/schedule/generators.h"
#include "common/error.h"

namespace braid::comm {

NodeLayout nodeLayout(const ScheduleSpec& spec) {
  NodeLayout layout;
  const int n = spec.nranks;
  BRAID_ENFORCE(spec.nodeOf.empty() || static_cast<int>(spec.nodeOf.size()) == n,
                ErrorCode::kInvalidUsage, "hier schedule: node layout has {} entries for {} ranks",
                spec.nodeOf.size(), n);
  std::map<int, int> dense;  // node id -> index, in order of the ids
  for (int r = 0; r < n; ++r) dense.emplace(spec.nodeOf.empty() ? 0 : spec.nodeOf[r], 0);
  int next = 0;
  for (auto& [id, index] : dense) index = next++;
  layout.ranksOf.resize(dense.size());
  layout.nodeIndex.resize(n);
  layout.localIndex.resize(n);
  for (int r = 0; r < n; ++r) {
    const int k = dense[spec.nodeOf.empty() ? 0 : spec.nodeOf[r]];
    layout.nodeIndex[r] = k;
    layout.localIndex[r] = static_cast<int>(layout.ranksOf[k].size());
    layout.ranksOf[k].push_back(r);
  }
  long lcm = 1;
  int largest = 1;
  for (const auto& ranks : layout.ranksOf) {
    const int m = static_cast<int>(ranks.size());
    largest = std::max(largest, m);
    if (lcm <= kMaxHierShards) lcm = std::lcm(lcm, static_cast<long>(m));
  }
  layout.shards = lcm <= kMaxHierShards ? static_cast<int>(lcm) : largest;
  return layout;
}

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

class HierLane {
 public:
  HierLane(const ScheduleSpec& spec, const NodeLayout& layout, int rank, int channel)
      : spec_(spec), layout_(layout), channel_(channel) {
    node_ = layout.nodeIndex[rank];
    local_ = layout.localIndex[rank];
    nodes_ = static_cast<int>(layout.ranksOf.size());
    m_ = static_cast<int>(layout.ranksOf[node_].size());
    shards_ = layout.shards;
  }

  Lane build(size_t lb, size_t le) {
    Lane lane;
    steps_ = &lane.steps;
    const size_t total = le - lb;
    if (total == 0) return lane;
    if (spec_.nranks == 1) {
      add(Prim::kCopy, -1, -1, in(lb), out(lb), total, true);
      return lane;
    }
    // Shards of at most one piece for the intra-node rings; with one rank per node everywhere
    // only the inter-node rings' sub-chunks (a shard / nodes) need to fit a piece.
    bool intra = false;
    for (const auto& ranks : layout_.ranksOf) intra = intra || ranks.size() > 1;
    const size_t per = spec_.elemsPerPiece ? spec_.elemsPerPiece : total;
    const size_t shardMax = intra ? per : per * nodes_;
    const size_t roundSize = shardMax > total / shards_ + 1 ? total : shardMax * shards_;
    const size_t rounds = pieceCount(total, roundSize);
    auto roundBegin = [&](size_t t) { return lb + t * roundSize; };
    auto roundLen = [&](size_t t) { return std::min(roundSize, le - roundBegin(t)); };
    for (size_t u = 0; u < rounds + 2; ++u) {
      if (u < rounds) reduceScatter(roundBegin(u), roundLen(u));
      if (u >= 1 && u - 1 < rounds) interNode(roundBegin(u - 1), roundLen(u - 1));
      if (u >= 2 && u - 2 < rounds) allGather(roundBegin(u - 2), roundLen(u - 2));
    }
    return lane;
  }

 private:
  void add(Prim prim, int recvPeer, int sendPeer, BufRange src, BufRange dst, size_t count,
           bool finalize = false) {
    steps_->push_back(makeStep(prim, channel_, recvPeer, sendPeer, src, dst, count, finalize));
  }
  int localRank(int j) const { return layout_.ranksOf[node_][mod(j, m_)]; }
  int groups() const { return (shards_ + m_ - 1) / m_; }
  // Shard s of the round [rb, rb + rlen).
  size_t shardBegin(size_t rb, size_t rlen, int s) const {
    return rb + splitBegin(rlen, shards_, s);
  }
  size_t shardLen(size_t rlen, int s) const {
    return splitBegin(rlen, shards_, s + 1) - splitBegin(rlen, shards_, s);
  }
  // Shard of group g held by local position q (none past the last shard: empty).
  int groupShard(int g, int q) const { return g * m_ + mod(q, m_); }

  // Ring reduce-scatter over the node's ranks for each group; local j ends with its shard of
  // the group reduced over the node, in the output (finalized when there is one node).
  void reduceScatter(size_t rb, size_t rlen) {
    if (m_ == 1) return;
    const int next = localRank(local_ + 1), prev = localRank(local_ - 1);
    for (int g = 0; g < groups(); ++g) {
      auto begin = [&](int q) {
        int s = groupShard(g, q);
        return s < shards_ ? shardBegin(rb, rlen, s) : rb;
      };
      auto len = [&](int q) {
        int s = groupShard(g, q);
        return s < shards_ ? shardLen(rlen, s) : size_t{0};
      };
      int q = local_ - 1;
      add(Prim::kSend, -1, next, in(begin(q)), {}, len(q));
      for (int s = 1; s <= m_ - 2; ++s) {
        q = local_ - 1 - s;
        add(Prim::kRecvReduceSend, prev, next, in(begin(q)), {}, len(q));
      }
      q = local_;
      add(Prim::kRecvReduce, prev, -1, in(begin(q)), out(begin(q)), len(q), nodes_ == 1);
    }
  }

  // A ring all-reduce through the owners of each of this rank's shards, one per node.
  void interNode(size_t rb, size_t rlen) {
    if (nodes_ == 1) return;
    const int k = nodes_;
    auto ownerOn = [&](int node, int s) {
      const auto& ranks = layout_.ranksOf[mod(node, k)];
      return ranks[s % ranks.size()];
    };
    // With one rank on this node nothing was reduce-scattered: the input is the node's share.
    auto src = [&](size_t offset) { return m_ == 1 ? in(offset) : out(offset); };
    for (int s = local_; s < shards_; s += m_) {
      const int next = ownerOn(node_ + 1, s), prev = ownerOn(node_ - 1, s);
      const size_t sb = shardBegin(rb, rlen, s), sl = shardLen(rlen, s);
      auto begin = [&](int c) { return sb + splitBegin(sl, k, mod(c, k)); };
      auto len = [&](int c) {
        return splitBegin(sl, k, mod(c, k) + 1) - splitBegin(sl, k, mod(c, k));
      };
      const int p = node_;
      int c = p - 1;
      add(Prim::kSend, -1, next, src(begin(c)), {}, len(c));
      for (int step = 1; step <= k - 2; ++step) {
        c = p - 1 - step;
        add(Prim::kRecvReduceSend, prev, next, src(begin(c)), {}, len(c));
      }
      c = p;
      add(Prim::kRecvReduceCopySend, prev, next, src(begin(c)), out(begin(c)), len(c), true);
      for (int step = 1; step <= k - 2; ++step) {
        c = p - step;
        add(Prim::kRecvCopySend, prev, next, {}, out(begin(c)), len(c));
      }
      c = p + 1;
      add(Prim::kRecv, prev, -1, {}, out(begin(c)), len(c));
    }
  }

  // Ring all-gather of the finished shards over the node's ranks, group by group.
  void allGather(size_t rb, size_t rlen) {
    if (m_ == 1) return;
    const int next = localRank(local_ + 1), prev = localRank(local_ - 1);
    for (int g = 0; g < groups(); ++g) {
      auto begin = [&](int q) {
        int s = groupShard(g, q);
        return s < shards_ ? shardBegin(rb, rlen, s) : rb;
      };
      auto len = [&](int q) {
        int s = groupShard(g, q);
        return s < shards_ ? shardLen(rlen, s) : size_t{0};
      };
      add(Prim::kSend, -1, next, out(begin(local_)), {}, len(local_));
      for (int s = 1; s <= m_ - 2; ++s) {
        const int q = local_ - s;
        add(Prim::kRecvCopySend, prev, next, {}, out(begin(q)), len(q));
      }
      const int q = local_ + 1;
      add(Prim::kRecv, prev, -1, {}, out(begin(q)), len(q));
    }
  }

  const ScheduleSpec& spec_;
  const NodeLayout& layout_;
  int channel_;
  int node_ = 0, local_ = 0, nodes_ = 1, m_ = 1, shards_ = 1;
  std::vector<Step>* steps_ = nullptr;
};

}  // namespace

RankProgram buildHier(const ScheduleSpec& spec, int rank) {
  const NodeLayout layout = nodeLayout(spec);
  RankProgram program;
  for (int lane = 0; lane < spec.lanes; ++lane) {
    HierLane h(spec, layout, rank, lane);
    program.lanes.push_back(h.build(splitBegin(spec.count, spec.lanes, lane),
                                    splitBegin(spec.count, spec.lanes, lane + 1)));
  }
  return program;
}

}  // namespace braid::comm
