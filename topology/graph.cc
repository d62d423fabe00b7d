// The cluster graph: link defaults, building it from descriptors, queries and a summary.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "topology/text.h"
#include "topology/topology.h"

namespace braid::topology {

LinkParams defaultShmLink() {
  // bench/RESULTS.md, 2 ranks on 2 cores: 256 MiB ring all-reduce busbw 9.36 GB/s (a ring of 2
  // moves S bytes per rank, so busbw is the link's bandwidth); 8 B all-reduce 0.33 us blocking,
  // 0.95 us non-blocking -> ~0.5 us per exchange, ~0.2 us per further slot.
  return LinkParams{9.4, 0.5, 0.2};
}

LinkParams defaultNetLink() { return LinkParams{1.25, 20.0, 1.0}; }

LinkParams defaultGpuLink() { return LinkParams{150.0, 3.0, 0.5}; }

const char* linkClassName(LinkClass link) {
  switch (link) {
    case LinkClass::kShm:
      return "shm";
    case LinkClass::kGpu:
      return "gpu";
    case LinkClass::kNet:
      return "net";
  }
  return "?";
}

int ClusterGraph::maxLocalRanks() const {
  size_t most = 0;
  for (const Node& node : nodes) most = std::max(most, node.ranks.size());
  return static_cast<int>(most);
}

LinkClass ClusterGraph::linkClass(int a, int b) const {
  const RankInfo& ra = ranks.at(a);
  const RankInfo& rb = ranks.at(b);
  if (ra.node != rb.node) return LinkClass::kNet;
  if (hasGpuLink && ra.gpu >= 0 && rb.gpu >= 0) return LinkClass::kGpu;
  return LinkClass::kShm;
}

const LinkParams& ClusterGraph::params(LinkClass link) const {
  switch (link) {
    case LinkClass::kGpu:
      return gpu;
    case LinkClass::kNet:
      return net;
    case LinkClass::kShm:
      break;
  }
  return shm;
}

double ClusterGraph::nicTotalGbps(int node) const {
  const Node& n = nodes.at(node);
  return std::max(1, n.nics) * (n.nicGbps > 0 ? n.nicGbps : net.gbps);
}

void ClusterGraph::validate() const {
  BRAID_ENFORCE(!ranks.empty() && !nodes.empty(), ErrorCode::kInvalidUsage,
                "topology: the graph has {} ranks on {} nodes; it needs at least one of each",
                ranks.size(), nodes.size());
  std::vector<int> seen(ranks.size(), 0);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& node = nodes[k];
    BRAID_ENFORCE(!node.ranks.empty(), ErrorCode::kInvalidUsage, "topology: node '{}' has no ranks",
                  node.name);
    for (size_t i = 0; i < node.ranks.size(); ++i) {
      int r = node.ranks[i];
      BRAID_ENFORCE(r >= 0 && r < size(), ErrorCode::kInvalidUsage,
                    "topology: node '{}' lists rank {} outside 0..{}", node.name, r, size() - 1);
      BRAID_ENFORCE(ranks[r].node == static_cast<int>(k) && ranks[r].local == static_cast<int>(i),
                    ErrorCode::kInvalidUsage,
                    "topology: rank {} is listed by node '{}' but records node {} local {}", r,
                    node.name, ranks[r].node, ranks[r].local);
      ++seen[r];
    }
  }
  for (int r = 0; r < size(); ++r) {
    BRAID_ENFORCE(seen[r] == 1, ErrorCode::kInvalidUsage,
                  "topology: rank {} is on {} nodes; each rank must be on exactly one", r, seen[r]);
  }
  for (LinkClass c : {LinkClass::kShm, LinkClass::kGpu, LinkClass::kNet}) {
    const LinkParams& p = params(c);
    BRAID_ENFORCE(p.gbps > 0 && p.latencyUs >= 0 && p.overheadUs >= 0, ErrorCode::kInvalidUsage,
                  "topology: link {} needs a positive bandwidth (has {} GB/s, {} us)",
                  linkClassName(c), p.gbps, p.latencyUs);
  }
}

ClusterGraph buildGraph(const std::vector<RankDescriptor>& descriptors) {
  BRAID_ENFORCE(!descriptors.empty(), ErrorCode::kInvalidUsage,
                "topology: buildGraph needs at least one rank descriptor");
  ClusterGraph g;
  std::map<std::string, int> nodeOfHost;
  std::map<std::string, int> namesUsed;
  g.ranks.resize(descriptors.size());
  for (size_t r = 0; r < descriptors.size(); ++r) {
    const RankDescriptor& d = descriptors[r];
    auto [it, fresh] = nodeOfHost.emplace(d.host, static_cast<int>(g.nodes.size()));
    if (fresh) {
      Node node;
      std::string base = d.hostname.empty() ? fmt::format("n{}", g.nodes.size()) : d.hostname;
      int& uses = namesUsed[base];
      node.name = uses == 0 ? base : fmt::format("{}#{}", base, uses);
      ++uses;
      node.host = d.host;
      node.packages = d.packages;
      node.numaNodes = d.numaNodes;
      node.cores = d.cores;
      node.pus = d.pus;
      node.l3Bytes = d.l3Bytes;
      node.devices = d.devices;
      // The fastest NICs carry the inter-node traffic (a slower management port does not).
      double nicSpeed = 0;
      for (const Device& dev : d.devices) {
        if (dev.kind == DeviceKind::kGpu) ++node.gpus;
        if (dev.kind == DeviceKind::kNic) nicSpeed = std::max(nicSpeed, dev.gbps);
      }
      for (const Device& dev : d.devices) {
        if (dev.kind == DeviceKind::kNic && dev.gbps == nicSpeed) ++node.nics;
      }
      node.nicGbps = nicSpeed;  // 0 = unknown: the net link's bandwidth
      g.nodes.push_back(std::move(node));
    }
    Node& node = g.nodes[it->second];
    RankInfo& info = g.ranks[r];
    info.node = it->second;
    info.local = static_cast<int>(node.ranks.size());
    info.gpu = d.gpu;
    info.numa = d.numa;
    info.cpus = d.cpus;
    node.ranks.push_back(static_cast<int>(r));
  }
  for (Node& node : g.nodes) {
    std::vector<std::string> sets;
    for (int r : node.ranks) sets.push_back(g.ranks[r].cpus);
    node.cpus = cpuCountOfUnion(sets);
  }
  g.validate();
  return g;
}

ClusterGraph uniformGraph(int nodes, int ranksPerNode) {
  BRAID_ENFORCE(nodes >= 1 && ranksPerNode >= 1, ErrorCode::kInvalidUsage,
                "topology: a uniform graph needs >= 1 node and rank per node (got {} x {})", nodes,
                ranksPerNode);
  ClusterGraph g;
  for (int k = 0; k < nodes; ++k) {
    Node node;
    node.name = fmt::format("n{}", k);
    for (int i = 0; i < ranksPerNode; ++i) {
      node.ranks.push_back(k * ranksPerNode + i);
      RankInfo info;
      info.node = k;
      info.local = i;
      g.ranks.push_back(info);
    }
    g.nodes.push_back(std::move(node));
  }
  return g;
}

std::string describeGraph(const ClusterGraph& g) {
  std::string out = fmt::format("{} ranks on {} node(s)\n", g.size(), g.nodes.size());
  auto linkLine = [&](LinkClass c) {
    const LinkParams& p = g.params(c);
    return fmt::format(
        "  link {:<3}  {:8.3f} GB/s ({:.1f} Gbit/s)  latency {} us  per-piece {} us\n",
        linkClassName(c), p.gbps, p.gbps * 8, text::formatReal(p.latencyUs),
        text::formatReal(p.overheadUs));
  };
  out += linkLine(LinkClass::kShm);
  if (g.hasGpuLink) out += linkLine(LinkClass::kGpu);
  if (g.nodes.size() > 1) out += linkLine(LinkClass::kNet);
  // Long lists of identical nodes print their first few and a count.
  constexpr size_t kShown = 4;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (k == kShown && g.nodes.size() > kShown + 1) {
      out += fmt::format("  ... {} more node(s)\n", g.nodes.size() - kShown - 1);
      k = g.nodes.size() - 2;
      continue;
    }
    out += fmt::format(
        "  node {} ({} rank(s): {}): {} package(s), {} NUMA node(s), {} cores, {} PUs, {} CPUs "
        "for its ranks, L3 {} KiB, {} GPU(s), {} NIC(s) x {:.3f} GB/s\n",
        n.name, n.ranks.size(), text::formatIntList(n.ranks), n.packages, n.numaNodes, n.cores,
        n.pus, n.cpus, n.l3Bytes >> 10, n.gpus, std::max(1, n.nics),
        n.nicGbps > 0 ? n.nicGbps : g.net.gbps);
    for (const Device& d : n.devices) {
      out += fmt::format("    {} {}{}{}{}\n", deviceKindName(d.kind), d.name,
                         d.pci.empty() ? "" : " pci " + d.pci,
                         d.numa >= 0 ? fmt::format(" numa {}", d.numa) : "",
                         d.gbps > 0 ? fmt::format(" {:.3f} GB/s", d.gbps) : "");
    }
  }
  return out;
}

}  // namespace braid::topology
