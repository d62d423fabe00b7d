// The topology file: a line format a person can write for a cluster they do not have
// (topology/README.md), and the dump of a discovered graph.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/env.h"
#include "common/error.h"
#include "topology/text.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

constexpr const char* kVersionWord = "braid-topology";
// A file describes at most this many ranks in all (node lines declare, rank lines place): more is
// a mistake, and a graph that size already takes hundreds of MB to hold and write back.

// Where a statement came from, for error messages.
struct Where {
  const std::string& source;
  int line;
};

template <typename... Args>
[[noreturn]] void bad(const Where& at, const std::string& field, fmt::format_string<Args...> format,
                      Args&&... args) {
  fail(ErrorCode::kInvalidUsage, "{} line {}: field '{}': {}", at.source, at.line, field,
       fmt::format(format, std::forward<Args>(args)...));
}

// A node name, or a range of them: "n[0-63]" is n0..n63 ("gpu[00-07]" keeps the zero padding).
// count() is known before names() makes them.
struct NamePattern {
  std::string head, tail;
  int64_t lo = 0, hi = -1;  // hi < lo: no range, the name is `head`
  size_t width = 0;
  int64_t count() const { return hi < lo ? 1 : hi - lo + 1; }
  std::vector<std::string> names() const {
    if (hi < lo) return {head};
    std::vector<std::string> out;
    for (int64_t i = lo; i <= hi; ++i) out.push_back(head + fmt::format("{:0{}}", i, width) + tail);
    return out;
  }
};

NamePattern namePattern(const Where& at, const std::string& field, const std::string& pattern) {
  size_t open = pattern.find('['), close = pattern.find(']');
  if (open == std::string::npos && close == std::string::npos) return {pattern, ""};
  if (open == std::string::npos || close == std::string::npos || close < open) {
    bad(at, field, "'{}' has unbalanced brackets (a range is written n[0-63])", pattern);
  }
  std::string range = pattern.substr(open + 1, close - open - 1);
  size_t dash = range.find('-');
  auto lo = text::parseInt(range.substr(0, dash));
  auto hi = dash == std::string::npos ? lo : text::parseInt(range.substr(dash + 1));
  if (!lo || !hi || *lo < 0 || *hi < *lo || *hi - *lo >= 1 << 20) {
    bad(at, field, "'{}' has a bad range '[{}]' (write [first-last], first <= last)", pattern,
        range);
  }
  const size_t width = range[0] == '0' && dash != std::string::npos && dash > 1 ? dash : 0;
  return {pattern.substr(0, open), pattern.substr(close + 1), *lo, *hi, width};
}

// The key=value words of a statement after its first `skip` words, each key once.
std::map<std::string, std::string> fields(const Where& at, const std::vector<std::string>& words,
                                          size_t skip, const std::set<std::string>& allowed) {
  std::map<std::string, std::string> out;
  for (size_t i = skip; i < words.size(); ++i) {
    auto kv = text::keyValue(words[i]);
    if (!kv) bad(at, words[i], "expected key=value");
    if (!allowed.count(kv->first)) {
      std::string list;
      for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
      bad(at, kv->first, "unknown field for '{}' (known: {})", words[0], list);
    }
    if (out.count(kv->first)) bad(at, kv->first, "given twice");
    auto value = text::unescape(kv->second);
    if (!value) bad(at, kv->first, "'{}' has a malformed %XX escape", kv->second);
    out[kv->first] = *value;
  }
  return out;
}

int intField(const Where& at, const std::map<std::string, std::string>& f, const char* key,
             int fallback, int min) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  auto v = text::parseInt(it->second);
  if (!v || *v < min || *v > text::kMaxCount) {
    bad(at, key, "'{}' is not an integer >= {}", it->second, min);
  }
  return static_cast<int>(*v);
}

double bandwidthField(const Where& at, const std::map<std::string, std::string>& f, const char* key,
                      double fallback) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  auto v = text::parseBandwidth(it->second);
  if (!v || *v <= 0) {
    bad(at, key, "'{}' is not a bandwidth with a unit (e.g. 100Gbit/s, 12.5GB/s, 800Mbit/s)",
        it->second);
  }
  return *v;
}

double latencyField(const Where& at, const std::map<std::string, std::string>& f, const char* key,
                    double fallback) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  auto v = text::parseLatency(it->second);
  if (!v) bad(at, key, "'{}' is not a time with a unit (e.g. 5us, 800ns, 1ms)", it->second);
  return *v;
}

// Rank placement lines, checked once every node is known.
struct RankLine {
  int line;
  std::vector<std::pair<int, int>> ranks;  // inclusive ranges, expanded only while placing
  std::string node;
  int gpu, numa;
  std::string cpus;
};

// Default per-rank details for a node without rank lines: GPU ranks drive GPUs in order.
RankInfo defaultRankInfo(const Node& node, int nodeIndex, int local) {
  RankInfo info;
  info.node = nodeIndex;
  info.local = local;
  info.gpu = node.gpus > 0 ? local % node.gpus : -1;
  return info;
}

}  // namespace

ClusterGraph parseGraph(const std::string& textIn, const std::string& source, int64_t maxRanks) {
  ClusterGraph g;
  std::map<std::string, int> nodeIndex;
  std::vector<int> nodeLine;
  std::map<std::string, int> linkLine;
  std::vector<RankLine> rankLines;
  // Ranks the node lines declare and rank lines place, bounded (maxRanks) as they are read: a
  // short line like "node n[0-1048575] ranks=16777216" must be refused, not allocated.
  int64_t declared = 0, placed = 0;
  std::istringstream in(textIn);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    const Where at{source, lineNo};
    std::vector<std::string> w = text::words(line);
    if (w.empty()) continue;
    const std::string& kw = w[0];
    if (kw == kVersionWord) {
      if (w.size() != 2 || w[1] != "1") {
        bad(at, "version", "'{}' is not a version this braid reads (1)",
            w.size() > 1 ? w[1] : std::string());
      }
    } else if (kw == "link") {
      if (w.size() < 2) bad(at, "class", "missing (link shm|gpu|net bw=... lat=...)");
      LinkParams* p = w[1] == "shm"   ? &g.shm
                      : w[1] == "gpu" ? &g.gpu
                      : w[1] == "net" ? &g.net
                                      : nullptr;
      if (!p) bad(at, "class", "'{}' is not a link class (shm, gpu, net)", w[1]);
      if (linkLine.count(w[1])) {
        bad(at, "class", "link {} is defined twice (first on line {})", w[1], linkLine[w[1]]);
      }
      linkLine[w[1]] = lineNo;
      auto f = fields(at, w, 2, {"bw", "lat", "overhead"});
      p->gbps = bandwidthField(at, f, "bw", p->gbps);
      p->latencyUs = latencyField(at, f, "lat", p->latencyUs);
      p->overheadUs = latencyField(at, f, "overhead", p->overheadUs);
      if (w[1] == "gpu") g.hasGpuLink = true;
    } else if (kw == "node") {
      if (w.size() < 2 || w[1].find('=') != std::string::npos) {
        bad(at, "name", "missing (node NAME ranks=N ...)");
      }
      auto f = fields(at, w, 2,
                      {"ranks", "host", "packages", "numa", "cores", "pus", "cpus", "l3", "gpus",
                       "nics", "nic"});
      if (!f.count("ranks")) bad(at, "ranks", "missing (how many ranks run on this node)");
      Node proto;
      const int ranks = intField(at, f, "ranks", 0, 1);
      proto.host = f.count("host") ? f["host"] : "";
      proto.packages = intField(at, f, "packages", 0, 0);
      proto.numaNodes = intField(at, f, "numa", 0, 0);
      proto.cores = intField(at, f, "cores", 0, 0);
      proto.pus = intField(at, f, "pus", 0, 0);
      proto.cpus = intField(at, f, "cpus", 0, 0);
      proto.gpus = intField(at, f, "gpus", 0, 0);
      proto.nics = intField(at, f, "nics", 0, 0);
      proto.nicGbps = bandwidthField(at, f, "nic", 0);
      if (f.count("l3")) {
        auto bytes = parseBytes(f["l3"]);
        if (!bytes) bad(at, "l3", "'{}' is not a byte size (e.g. 32M)", f["l3"]);
        proto.l3Bytes = *bytes;
      }
      const NamePattern names = namePattern(at, "name", w[1]);
      declared += names.count() * ranks;
      if (declared > maxRanks) {
        bad(at, "ranks", "the node lines declare more than {} ranks", maxRanks);
      }
      for (const std::string& rawName : names.names()) {
        auto name = text::unescape(rawName);
        if (!name || name->empty()) bad(at, "name", "'{}' is not a node name", rawName);
        if (nodeIndex.count(*name)) {
          bad(at, "name", "node '{}' is defined twice (first on line {})", *name,
              nodeLine[nodeIndex[*name]]);
        }
        Node node = proto;
        node.name = *name;
        node.ranks.resize(ranks, -1);  // placed below
        nodeIndex[*name] = static_cast<int>(g.nodes.size());
        nodeLine.push_back(lineNo);
        g.nodes.push_back(std::move(node));
      }
    } else if (kw == "device") {
      if (w.size() < 2 || w[1].find('=') != std::string::npos) {
        bad(at, "node", "missing (device NODE kind=gpu|nic|other name=...)");
      }
      auto f = fields(at, w, 2, {"kind", "name", "pci", "numa", "speed"});
      Device d;
      if (!f.count("kind")) bad(at, "kind", "missing (gpu, nic or other)");
      if (f["kind"] == "gpu") {
        d.kind = DeviceKind::kGpu;
      } else if (f["kind"] == "nic") {
        d.kind = DeviceKind::kNic;
      } else if (f["kind"] == "other") {
        d.kind = DeviceKind::kOther;
      } else {
        bad(at, "kind", "'{}' is not a device kind (gpu, nic, other)", f["kind"]);
      }
      d.name = f.count("name") ? f["name"] : "";
      d.pci = f.count("pci") ? f["pci"] : "";
      d.numa = intField(at, f, "numa", -1, -1);
      d.gbps = f.count("speed") ? bandwidthField(at, f, "speed", 0) : 0;
      const NamePattern nodes = namePattern(at, "node", w[1]);
      if (nodes.count() > 1 && nodes.count() > static_cast<int64_t>(g.nodes.size())) {
        bad(at, "node", "'{}' names {} nodes, more than the {} defined above", w[1], nodes.count(),
            g.nodes.size());
      }
      for (const std::string& rawName : nodes.names()) {
        auto name = text::unescape(rawName);
        if (!name || !nodeIndex.count(*name)) {
          bad(at, "node", "'{}' is not a node defined above", rawName);
        }
        g.nodes[nodeIndex[*name]].devices.push_back(d);
      }
    } else if (kw == "rank") {
      if (w.size() < 2 || w[1].find('=') != std::string::npos) {
        bad(at, "rank", "missing (rank R node=NAME ...)");
      }
      auto ranges = text::parseIntRanges(w[1]);
      if (!ranges || ranges->empty()) bad(at, "rank", "'{}' is not a rank or range (5, 0-7)", w[1]);
      for (const auto& [lo, hi] : *ranges) placed += int64_t{hi} - lo + 1;
      if (placed > maxRanks) {
        bad(at, "rank", "the rank lines place more than {} ranks", maxRanks);
      }
      auto f = fields(at, w, 2, {"node", "gpu", "numa", "cpus"});
      if (!f.count("node")) bad(at, "node", "missing (the node this rank runs on)");
      RankLine r{lineNo,
                 std::move(*ranges),
                 f["node"],
                 intField(at, f, "gpu", -1, -1),
                 intField(at, f, "numa", -1, -1),
                 f.count("cpus") ? f["cpus"] : ""};
      if (!nodeIndex.count(r.node)) bad(at, "node", "'{}' is not a node defined above", r.node);
      rankLines.push_back(std::move(r));
    } else {
      bad(at, "statement", "'{}' is not a statement (braid-topology, link, node, device, rank)",
          kw);
    }
  }
  const Where end{source, lineNo};
  if (g.nodes.empty()) bad(end, "node", "the file describes no nodes (node NAME ranks=N)");
  int total = 0;
  for (const Node& node : g.nodes) total += static_cast<int>(node.ranks.size());
  g.ranks.resize(total);
  if (rankLines.empty()) {
    int next = 0;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      Node& node = g.nodes[k];
      for (size_t i = 0; i < node.ranks.size(); ++i) {
        node.ranks[i] = next;
        g.ranks[next++] = defaultRankInfo(node, static_cast<int>(k), static_cast<int>(i));
      }
    }
  } else {
    std::vector<int> placedOn(total, 0);
    std::vector<std::vector<int>> members(g.nodes.size());
    for (const RankLine& r : rankLines) {
      const Where at{source, r.line};
      for (const auto& [lo, hi] : r.ranks) {
        for (int rank = lo; rank <= hi; ++rank) {
          if (rank >= total) {
            bad(at, "rank", "rank {} is outside 0..{} (the node lines declare {} ranks)", rank,
                total - 1, total);
          }
          if (placedOn[rank])
            bad(at, "rank", "rank {} is placed twice (first on line {})", rank, placedOn[rank]);
          placedOn[rank] = r.line;
          const int k = nodeIndex[r.node];
          members[k].push_back(rank);
          RankInfo& info = g.ranks[rank];
          info.node = k;
          info.gpu = r.gpu;
          info.numa = r.numa;
          info.cpus = r.cpus;
        }
      }
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      Node& node = g.nodes[k];
      if (members[k].size() != node.ranks.size()) {
        bad(Where{source, nodeLine[k]}, "ranks",
            "node '{}' declares ranks={} but rank lines place {} rank(s) on it", node.name,
            node.ranks.size(), members[k].size());
      }
      std::sort(members[k].begin(), members[k].end());
      node.ranks = members[k];
      for (size_t i = 0; i < node.ranks.size(); ++i)
        g.ranks[node.ranks[i]].local = static_cast<int>(i);
    }
  }
  g.validate();
  return g;
}

std::string formatGraph(const ClusterGraph& g) {
  std::string out =
      fmt::format("# braid topology: {} ranks on {} node(s). Format: topology/README.md\n{} 1\n",
                  g.size(), g.nodes.size(), kVersionWord);
  auto link = [&](const char* name, const LinkParams& p) {
    out += fmt::format("link {} bw={} lat={} overhead={}\n", name, text::formatBandwidth(p.gbps),
                       text::formatLatency(p.latencyUs), text::formatLatency(p.overheadUs));
  };
  link("shm", g.shm);
  if (g.hasGpuLink) link("gpu", g.gpu);
  link("net", g.net);
  // Rank lines only when the placement or details differ from what node lines imply.
  bool defaults = true;
  int next = 0;
  for (size_t k = 0; k < g.nodes.size() && defaults; ++k) {
    const Node& node = g.nodes[k];
    for (size_t i = 0; i < node.ranks.size() && defaults; ++i) {
      defaults =
          node.ranks[i] == next++ &&
          g.ranks[node.ranks[i]] == defaultRankInfo(node, static_cast<int>(k), static_cast<int>(i));
    }
  }
  for (const Node& n : g.nodes) {
    out += fmt::format("node {} ranks={}", text::escape(n.name), n.ranks.size());
    if (!n.host.empty()) out += " host=" + text::escape(n.host);
    auto count = [&](const char* key, int v) {
      if (v) out += fmt::format(" {}={}", key, v);
    };
    count("packages", n.packages);
    count("numa", n.numaNodes);
    count("cores", n.cores);
    count("pus", n.pus);
    count("cpus", n.cpus);
    if (n.l3Bytes) out += fmt::format(" l3={}", n.l3Bytes);
    count("gpus", n.gpus);
    count("nics", n.nics);
    if (n.nicGbps > 0) out += " nic=" + text::formatBandwidth(n.nicGbps);
    out += '\n';
    for (const Device& d : n.devices) {
      out += fmt::format("device {} kind={} name={}", text::escape(n.name), deviceKindName(d.kind),
                         text::escape(d.name));
      if (!d.pci.empty()) out += " pci=" + text::escape(d.pci);
      if (d.numa >= 0) out += fmt::format(" numa={}", d.numa);
      if (d.gbps > 0) out += " speed=" + text::formatBandwidth(d.gbps);
      out += '\n';
    }
  }
  if (!defaults) {
    for (int r = 0; r < g.size(); ++r) {
      const RankInfo& info = g.ranks[r];
      out += fmt::format("rank {} node={}", r, text::escape(g.nodes[info.node].name));
      if (info.gpu >= 0) out += fmt::format(" gpu={}", info.gpu);
      if (info.numa >= 0) out += fmt::format(" numa={}", info.numa);
      if (!info.cpus.empty()) out += " cpus=" + text::escape(info.cpus);
      out += '\n';
    }
  }
  return out;
}

void saveGraph(const ClusterGraph& graph, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) failErrno(fmt::format("topology: cannot write '{}'", path), errno);
  out << formatGraph(graph);
  out.close();
  if (!out) failErrno(fmt::format("topology: writing '{}' failed", path), errno);
}

ClusterGraph loadGraph(const std::string& path) {
  std::ifstream in(path);
  if (!in) failErrno(fmt::format("topology: cannot read topology file '{}'", path), errno);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseGraph(buffer.str(), path);
}

std::optional<ClusterGraph> graphFromEnvironment(int expectedRanks) {
  auto path = envString(kTopoFileEnv);
  if (!path) return std::nullopt;
  ClusterGraph g = loadGraph(*path);
  BRAID_ENFORCE(expectedRanks <= 0 || g.size() == expectedRanks, ErrorCode::kInvalidUsage,
                "{}='{}' describes {} ranks, but the communicator has {}", kTopoFileEnv, *path,
                g.size(), expectedRanks);
  return g;
}

bool dumpGraphIfAsked(const ClusterGraph& graph, int rank) {
  auto path = envString(kTopoDumpFileEnv);
  if (!path || rank != 0) return false;
  saveGraph(graph, *path);
  return true;
}

}  // namespace braid::topology
