#include "topology/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"

namespace braid::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// bench/RESULTS.md, 2 ranks: buffers that stay in the last-level cache all-reduce at ~21 GB/s
// busbw (64 KiB .. 4 MiB), against ~9.4 GB/s from memory (256 MiB).
constexpr double kCacheBoost = 2.2;
constexpr uint64_t kDefaultCacheBytes = 8 << 20;  // when the graph does not say

int ceilLog2(int v) {
  int d = 0;
  while ((1 << d) < v) ++d;
  return d;
}

double bytesPerUs(double gbps) { return gbps * 1e3; }

std::string sizeText(double bytes) {
  if (bytes >= (1 << 30)) return fmt::format("{:.3g} GiB", bytes / (1 << 30));
  if (bytes >= (1 << 20)) return fmt::format("{:.3g} MiB", bytes / (1 << 20));
  if (bytes >= (1 << 10)) return fmt::format("{:.3g} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

// Rank at `position` of lane `lane` starting at `first` (the schedules' ring and chain order:
// even lanes ascend, odd lanes descend).
int orderAt(int n, int lane, int first, int position) {
  int offset = lane % 2 == 0 ? position : n - position;
  return ((first + offset) % n + n) % n;
}

}  // namespace

CostModel::CostModel(ClusterGraph graph) : graph_(std::move(graph)) {
  graph_.validate();
  minNicGbps_ = kInf;
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    const Node& node = graph_.nodes[k];
    NodeCost cost;
    cost.localRanks = static_cast<int>(node.ranks.size());
    bool allGpu = graph_.hasGpuLink;
    for (int r : node.ranks) allGpu = allGpu && graph_.ranks[r].gpu >= 0;
    cost.intra = allGpu ? graph_.gpu : graph_.shm;
    // More ranks than CPUs: they take turns, so each copies proportionally slower and waits
    // longer to be scheduled (bench/RESULTS.md: 4 ranks on 2 cores reach ~half the busbw).
    if (!allGpu && node.cpus > 0 && cost.localRanks > node.cpus) {
      double f = static_cast<double>(cost.localRanks) / node.cpus;
      cost.intra.gbps /= f;
      cost.intra.latencyUs *= f;
      cost.intra.overheadUs *= f;
    }
    cost.cacheBytes = node.l3Bytes ? node.l3Bytes : kDefaultCacheBytes;
    cost.nicGbps = graph_.nicTotalGbps(static_cast<int>(k));
    minNicGbps_ = std::min(minNicGbps_, cost.nicGbps);
    nodeCost_.push_back(cost);
  }
}

CostModel::Links CostModel::linksFor(double bytes) const {
  Links links;
  double slowest = kInf;
  for (size_t k = 0; k < nodeCost_.size(); ++k) {
    const NodeCost& node = nodeCost_[k];
    LinkParams p = node.intra;
    // Shared memory copies run at cache speed while every rank's input and output fit in it.
    const bool shm = !(graph_.hasGpuLink && p == graph_.gpu);
    if (shm && 2 * bytes * node.localRanks <= static_cast<double>(node.cacheBytes)) {
      p.gbps *= kCacheBoost;
    }
    links.intra.push_back(p);
    if (node.localRanks > 1 && p.gbps < slowest) {
      slowest = p.gbps;
      links.slowest = p;
    }
  }
  if (slowest == kInf) links.slowest = links.intra[0];
  return links;
}

double CostModel::slowestEdgeUs(const Links& links, int lanes, int first, bool closed, double bytes,
                                bool withLatency, std::string* which) const {
  const int n = ranks();
  const int edges = closed ? n : n - 1;
  // Connections leaving and entering each node over all lanes share its NICs.
  std::vector<int> out(nodes(), 0), in(nodes(), 0);
  for (int lane = 0; lane < lanes; ++lane) {
    for (int p = 0; p < edges; ++p) {
      int a = graph_.nodeOf(orderAt(n, lane, first, p));
      int b = graph_.nodeOf(orderAt(n, lane, first, (p + 1) % n));
      if (a != b) {
        ++out[a];
        ++in[b];
      }
    }
  }
  double worst = 0;
  // Every lane of one parity has the same edges; look at one of each.
  for (int lane = 0; lane < std::min(lanes, 2); ++lane) {
    for (int p = 0; p < edges; ++p) {
      int ra = orderAt(n, lane, first, p), rb = orderAt(n, lane, first, (p + 1) % n);
      int a = graph_.nodeOf(ra), b = graph_.nodeOf(rb);
      double t;
      std::string what;
      if (a == b) {
        const LinkParams& intra = links.intra[a];
        // A rank's lanes share its copy bandwidth.
        t = (withLatency ? intra.latencyUs : intra.overheadUs) +
            bytes / bytesPerUs(intra.gbps / lanes);
        what = fmt::format("{} {:.3g} GB/s", linkClassName(graph_.linkClass(ra, rb)), intra.gbps);
      } else {
        double bw = std::min(
            {graph_.net.gbps, nodeCost_[a].nicGbps / out[a], nodeCost_[b].nicGbps / in[b]});
        t = (withLatency ? graph_.net.latencyUs : graph_.net.overheadUs) + bytes / bytesPerUs(bw);
        what = fmt::format("net {:.3g} GB/s per connection, {} connection(s) per NIC", bw,
                           std::max(out[a], in[b]));
      }
      if (t > worst) {
        worst = t;
        if (which) *which = what;
      }
    }
  }
  return worst;
}

Prediction CostModel::predict(Collective coll, size_t bytes, const Candidate& c) const {
  BRAID_ENFORCE(c.lanes >= 1 && c.chunkBytes >= 1, ErrorCode::kInvalidUsage,
                "cost model: candidate {} needs lanes >= 1 and a chunk (got {} lanes, {} B)",
                algorithmName(c.algo), c.lanes, c.chunkBytes);
  const double s = static_cast<double>(bytes);
  const Links links = linksFor(s);
  if (ranks() == 1) {
    // One rank: a local copy whatever the family.
    return {s / bytesPerUs(links.intra[0].gbps), "one rank: a local copy"};
  }
  switch (c.algo) {
    case Algorithm::kRing:
      return ring(links, coll, s, c);
    case Algorithm::kOneShot:
      return direct(links, coll, s, c);
    case Algorithm::kChain:
      if (coll != Collective::kBroadcast && coll != Collective::kReduce) break;
      return chain(links, s, c);
    case Algorithm::kTree:
      if (coll != Collective::kAllReduce) break;
      return tree(links, s, c);
    case Algorithm::kHier:
      if (coll != Collective::kAllReduce) break;
      return hier(links, s, c);
    case Algorithm::kSingleCopy:
      if (coll != Collective::kAllReduce) break;
      return singleCopy(links, s);
    case Algorithm::kRankOrder:
      return rankOrder(links, coll, s, c);
    case Algorithm::kPairwise:
      if (coll != Collective::kAllToAll) break;
      return pairwise(links, s, c);
  }
  return {kInf, fmt::format("{} does not compute {}", algorithmName(c.algo), collectiveName(coll))};
}

Prediction CostModel::ring(const Links& links, Collective coll, double s, const Candidate& c) const {
  const int n = ranks();
  int steps;
  switch (coll) {
    case Collective::kAllReduce:
      steps = 2 * (n - 1);
      break;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      steps = n - 1;
      break;
    default:
      return {kInf, fmt::format("ring does not compute {}", collectiveName(coll))};
  }
  // Each lane walks its part in rounds of one chunk per rank (comm/schedule/ring.cc); the
  // first round pays each step's latency, later rounds follow through the slots in flight.
  const double perLane = s / c.lanes;
  const double chunk = static_cast<double>(c.chunkBytes);
  const double rounds = std::max(1.0, std::ceil(perLane / (n * chunk)));
  const double step = perLane / (n * rounds);
  std::string which;
  const double first = slowestEdgeUs(links, c.lanes, 0, true, step, true, &which);
  const double next = slowestEdgeUs(links, c.lanes, 0, true, step, false, nullptr);
  return {steps * (first + (rounds - 1) * next),
          fmt::format("{} steps x {:.0f} round(s) of {}, slowest link {}", steps, rounds,
                      sizeText(step), which)};
}

Prediction CostModel::direct(const Links& links, Collective coll, double s, const Candidate& c) const {
  const int n = ranks();
  const bool rooted = isRooted(coll);
  // `s` is the whole buffer; these send each peer its block of it.
  const bool blocks = coll == Collective::kReduceScatter || coll == Collective::kAllGather ||
                      coll == Collective::kAllToAll || coll == Collective::kGather ||
                      coll == Collective::kScatter;
  const double perPeer = blocks ? s / n : s;
  const double chunk = static_cast<double>(c.chunkBytes);
  const double pieces = std::max(1.0, std::ceil(perPeer / chunk));
  double worstRank = 0, worstNic = 0;
  for (int k = 0; k < nodes(); ++k) {
    if (rooted && k != graph_.nodeOf(0)) continue;  // only the root sends (or receives) it all
    const NodeCost& node = nodeCost_[k];
    const int local = node.localRanks, remote = n - local;
    // One rank's messages go out one after another; the first one's overhead is its latency.
    const LinkParams& intra = links.intra[k];
    double rank = (local - 1) * (pieces * intra.overheadUs + perPeer / bytesPerUs(intra.gbps)) +
                  remote * (pieces * graph_.net.overheadUs + perPeer / bytesPerUs(graph_.net.gbps));
    worstRank = std::max(worstRank, rank);
    const double senders = rooted ? 1 : local;
    worstNic = std::max(worstNic, senders * remote * perPeer / bytesPerUs(node.nicGbps));
  }
  const double latency = nodes() > 1 ? graph_.net.latencyUs : links.slowest.latencyUs;
  const double overhead = nodes() > 1 ? graph_.net.overheadUs : links.slowest.overheadUs;
  const double body = std::max(worstRank - overhead, worstNic);
  return {latency + std::max(0.0, body),
          fmt::format("one exchange of {} x {} peers per rank{}", sizeText(perPeer), n - 1,
                      worstNic > worstRank ? ", bound by the NIC" : "")};
}

Prediction CostModel::pairwise(const Links& links, double s, const Candidate& c) const {
  // n-1 steps; in step k rank r sends its block to r+k and receives r-k's, and step k+1 begins
  // once that block has arrived: every step pays a latency and lasts as long as its slowest pair.
  // A node's ranks that send off the node in one step share its NICs.
  const int n = ranks();
  const double perPeer = s / n;
  const double pieces = std::max(1.0, std::ceil(perPeer / static_cast<double>(c.chunkBytes)));
  double total = 0;
  bool netBound = false;
  std::vector<int> offNode(nodes());
  for (int k = 1; k < n; ++k) {
    std::fill(offNode.begin(), offNode.end(), 0);
    for (int r = 0; r < n; ++r)
      if (graph_.nodeOf(r) != graph_.nodeOf((r + k) % n)) ++offNode[graph_.nodeOf(r)];
    double worst = 0;
    for (int r = 0; r < n; ++r) {
      const int a = graph_.nodeOf(r), b = graph_.nodeOf((r + k) % n);
      double t;
      if (a == b) {
        const LinkParams& intra = links.intra[a];
        t = intra.latencyUs + (pieces - 1) * intra.overheadUs + perPeer / bytesPerUs(intra.gbps);
      } else {
        const double bw = std::min(graph_.net.gbps, nodeCost_[a].nicGbps / offNode[a]);
        t = graph_.net.latencyUs + (pieces - 1) * graph_.net.overheadUs + perPeer / bytesPerUs(bw);
      }
      if (t > worst) {
        worst = t;
        netBound = a != b;
      }
    }
    total += worst;
  }
  return {total, fmt::format("{} steps of {} to one peer each{}", n - 1, sizeText(perPeer),
                             netBound ? ", the last bound by the network" : "")};
}

Prediction CostModel::rankOrder(const Links& links, Collective coll, double s,
                                 const Candidate& c) const {
  // The direct family's exchanges: all-reduce = the blocks' exchange (an all-to-all of S) then
  // an all-gather of S; reduce-scatter the exchange alone; reduce a gather of S at the root.
  Prediction p;
  switch (coll) {
    case Collective::kAllReduce: {
      const Prediction a = direct(links, Collective::kAllToAll, s, c);
      const Prediction b = direct(links, Collective::kAllGather, s, c);
      return {a.timeUs + b.timeUs, "exchange of blocks, then all-gather: " + a.detail};
    }
    case Collective::kReduceScatter:
      p = direct(links, Collective::kAllToAll, s, c);
      return {p.timeUs, "exchange of blocks: " + p.detail};
    case Collective::kReduce:
      p = direct(links, Collective::kGather, s * ranks(), c);
      return {p.timeUs, "gather at the root: " + p.detail};
    default:
      return {kInf, fmt::format("rank order does not compute {}", collectiveName(coll))};
  }
}

Prediction CostModel::singleCopy(const Links& links, double s) const {
  if (nodes() > 1) return {kInf, "single copy needs every rank on one node"};
  const int n = ranks();
  // Three exchanges of a few bytes (the buffers' addresses, "shares reduced", the completion),
  // and each rank copies its S/n share of n-1 peers' inputs in, then the n-1 other shares from
  // their owners' outputs: the ring's bytes, without a handshake per piece.
  const LinkParams& intra = links.intra[0];
  const double moved = 2.0 * (n - 1) / n * s;
  return {3 * intra.latencyUs + moved / bytesPerUs(intra.gbps),
          fmt::format("3 exchanges + {} copied per rank at {:.3g} GB/s", sizeText(moved),
                      intra.gbps)};
}

Prediction CostModel::chain(const Links& links, double s, const Candidate& c) const {
  const int n = ranks();
  const double perLane = s / c.lanes;
  const double piece = std::max(1.0, std::min(static_cast<double>(c.chunkBytes), perLane));
  const double pieces = std::max(1.0, std::ceil(perLane / piece));
  // Fill: the first piece crosses every hop; then one piece per slowest hop (latency hidden by
  // the slots in flight).
  double fill = 0, worstHop = 0;
  std::vector<int> out(nodes(), 0), in(nodes(), 0);
  for (int lane = 0; lane < c.lanes; ++lane) {
    for (int p = 0; p + 1 < n; ++p) {
      int a = graph_.nodeOf(orderAt(n, lane, 0, p)), b = graph_.nodeOf(orderAt(n, lane, 0, p + 1));
      if (a != b) ++out[a], ++in[b];
    }
  }
  std::string which;
  for (int p = 0; p + 1 < n; ++p) {
    int ra = orderAt(n, 0, 0, p), rb = orderAt(n, 0, 0, p + 1);
    int a = graph_.nodeOf(ra), b = graph_.nodeOf(rb);
    const LinkParams& link = a == b ? links.intra[a] : graph_.net;
    double bw = a == b ? link.gbps / c.lanes
                       : std::min({graph_.net.gbps, nodeCost_[a].nicGbps / out[a],
                                   nodeCost_[b].nicGbps / in[b]});
    double xfer = link.overheadUs + piece / bytesPerUs(bw);
    fill += link.latencyUs + xfer;
    if (xfer > worstHop) {
      worstHop = xfer;
      which = a == b ? linkClassName(graph_.linkClass(ra, rb)) : "net";
    }
  }
  return {fill + (pieces - 1) * worstHop,
          fmt::format("{} hops, {:.0f} piece(s) of {}, slowest hop {}", n - 1, pieces,
                      sizeText(piece), which)};
}

Prediction CostModel::tree(const Links& links, double s, const Candidate& c) const {
  const int n = ranks(), bigN = nodes(), l = graph_.maxLocalRanks();
  // Two trees, each reducing and then broadcasting half of the buffer, split over the lanes.
  const double half = s / 2 / c.lanes;
  const double piece = std::max(1.0, std::min(static_cast<double>(c.chunkBytes), half));
  const double pieces = std::max(1.0, std::ceil(half / piece));
  const int netDepth = bigN > 1 ? ceilLog2(bigN) : 0;
  const int intraDepth = bigN > 1 ? (l > 1 ? ceilLog2(l) : 0) : ceilLog2(n);
  const LinkParams& intra = links.slowest;
  const LinkParams& net = graph_.net;
  const double intraBw = intra.gbps / c.lanes;
  const double fill =
      netDepth * (net.latencyUs + net.overheadUs + piece / bytesPerUs(net.gbps)) +
      intraDepth * (intra.latencyUs + intra.overheadUs + piece / bytesPerUs(intraBw));
  // Steady state, reduce and broadcast overlapped: an interior rank moves ~4 pieces each way
  // per piece of progress (2 children up, 1 parent, and the broadcast back); a node's NIC carries
  // 4 connections' worth: each tree's reduce and the other tree's broadcast cross it in the same
  // direction (calibrated on 2 namespace hosts x 2 ranks at 1 Gbit/s: 64 MiB in 1203 ms, twice
  // hier's 572 ms; bench/RESULTS.md).
  const double intraSteady =
      intraDepth > 0 ? 2 * intra.overheadUs + 4 * piece / bytesPerUs(intraBw) : 0;
  const double flows = 4;
  const double netBw = std::min(minNicGbps_ / c.lanes, flows * net.gbps);
  const double netSteady =
      netDepth > 0 ? 2 * net.overheadUs + flows * piece / bytesPerUs(netBw) : 0;
  const double steady = std::max(intraSteady, netSteady);
  // However few the pieces, all of them cross the NICs: flows / 2 buffers per direction.
  const double nicFloor = netDepth > 0 ? flows / 2 * s / bytesPerUs(minNicGbps_) : 0;
  return {std::max(2 * fill + (pieces - 1) * steady, nicFloor),
          fmt::format("depth {} ({} over the network), {:.0f} piece(s) of {} per tree, steady "
                      "bound by {}",
                      netDepth + intraDepth, netDepth, pieces, sizeText(piece),
                      netSteady > intraSteady ? "the NIC" : "the intra-node link")};
}

Prediction CostModel::hier(const Links& links, double s, const Candidate& c) const {
  const int bigN = nodes(), l = graph_.maxLocalRanks();
  if (bigN < 2 || l < 2) {
    return {kInf, bigN < 2 ? "hier needs more than one node" : "hier needs >1 rank on a node"};
  }
  const double perLane = s / c.lanes;
  const double chunk = static_cast<double>(c.chunkBytes);
  const LinkParams& intra = links.slowest;
  const LinkParams& net = graph_.net;
  const double intraBw = bytesPerUs(intra.gbps / c.lanes);
  // A ring of `steps` steps over `bytes` among `members` in rounds of one chunk per member:
  // latency on the first round, per-piece overhead on the others.
  auto ringUs = [&](const LinkParams& link, double bw, int members, int steps, double bytes) {
    const double rounds = std::max(1.0, std::ceil(bytes / (members * chunk)));
    const double step = bytes / (members * rounds);
    return steps * (link.latencyUs + step / bw) +
           steps * (rounds - 1) * (link.overheadUs + step / bw);
  };
  const double phase1 = ringUs(intra, intraBw, l, l - 1, perLane);  // intra-node reduce-scatter
  const double phase3 = phase1;                                     // intra-node all-gather
  // L shard rings per lane leave every node through its NICs at once.
  const double flows = static_cast<double>(l) * c.lanes;
  const double netBw = std::min(net.gbps, minNicGbps_ / flows);
  const double phase2 = ringUs(net, bytesPerUs(netBw), bigN, 2 * (bigN - 1), perLane / l);
  // Pipelined: the slowest phase, plus the first chunks' way through the intra-node phases
  // before the network has work and the last ones' after.
  const double piece = std::min(chunk, perLane / l);
  const double fill = 2.0 * (l - 1) * (intra.latencyUs + piece / intraBw);
  const double slowest = std::max({phase1, phase2, phase3});
  return {slowest + fill,
          fmt::format("intra {:.1f} us | inter {:.1f} us ({:.0f} shard ring(s) per NIC at {:.3g} "
                      "GB/s each) | intra {:.1f} us, pipelined, fill {:.1f} us",
                      phase1, phase2, flows, netBw, phase3, fill)};
}

}  // namespace braid::topology
