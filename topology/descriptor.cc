// RankDescriptor <-> one line of "key=value" words, every value escaped (topology/text.h).
#include <fmt/format.h>

#include <sstream>

#include "common/error.h"
#include "topology/text.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

constexpr const char* kMagic = "braid-rank/1";

[[noreturn]] void bad(const std::string& field, const std::string& value, const char* why) {
  fail(ErrorCode::kInvalidUsage, "rank descriptor: field '{}': '{}' {}", field, value, why);
}

// Indices (numa, gpu) are >= -1 (none or unknown), counts >= 0 (0 unknown), as in the topology
// file (graph_file.cc), which a graph built from descriptors is dumped to.
int toInt(const std::string& field, const std::string& value, int min = -1) {
  auto v = text::parseInt(value);
  if (!v || *v < min || *v > text::kMaxCount) {
    bad(field, value, min < 0 ? "is not an integer >= -1" : "is not a count");
  }
  return static_cast<int>(*v);
}

uint64_t toBytes(const std::string& field, const std::string& value) {
  auto v = text::parseInt(value);
  if (!v || *v < 0) bad(field, value, "is not a byte count");
  return static_cast<uint64_t>(*v);
}

std::string encodeDevice(const Device& d) {
  return fmt::format("{},{},{},{},{}", deviceKindName(d.kind), text::escape(d.name),
                     text::escape(d.pci), d.numa, text::formatReal(d.gbps));
}

Device decodeDevice(const std::string& value) {
  std::vector<std::string> parts;
  std::stringstream in(value);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  if (!value.empty() && value.back() == ',') parts.push_back("");
  if (parts.size() != 5) bad("dev", value, "is not kind,name,pci,numa,gbps");
  Device d;
  if (parts[0] == "gpu") {
    d.kind = DeviceKind::kGpu;
  } else if (parts[0] == "nic") {
    d.kind = DeviceKind::kNic;
  } else if (parts[0] == "other") {
    d.kind = DeviceKind::kOther;
  } else {
    bad("dev", value, "has an unknown kind (gpu, nic, other)");
  }
  auto name = text::unescape(parts[1]), pci = text::unescape(parts[2]);
  if (!name || !pci) bad("dev", value, "has a malformed %XX escape");
  d.name = *name;
  d.pci = *pci;
  d.numa = toInt("dev", parts[3]);
  auto gbps = text::parseReal(parts[4]);
  if (!gbps) bad("dev", value, "has a malformed speed");
  d.gbps = *gbps;
  return d;
}

}  // namespace

std::string serializeDescriptor(const RankDescriptor& d) {
  std::string out = kMagic;
  auto add = [&](const char* key, const std::string& value) {
    out += fmt::format(" {}={}", key, value);
  };
  add("host", text::escape(d.host));
  add("hostname", text::escape(d.hostname));
  add("machine", text::escape(d.machine));
  add("cpus", text::escape(d.cpus));
  add("numa", std::to_string(d.numa));
  add("gpu", std::to_string(d.gpu));
  add("packages", std::to_string(d.packages));
  add("numa_nodes", std::to_string(d.numaNodes));
  add("cores", std::to_string(d.cores));
  add("pus", std::to_string(d.pus));
  add("l2", std::to_string(d.l2Bytes));
  add("l3", std::to_string(d.l3Bytes));
  add("l3_count", std::to_string(d.l3Count));
  add("hwloc", d.fromHwloc ? "1" : "0");
  for (const Device& dev : d.devices) add("dev", encodeDevice(dev));
  return out;
}

RankDescriptor parseDescriptor(const std::string& line) {
  std::vector<std::string> words;
  {
    std::istringstream in(line);
    std::string w;
    while (in >> w) words.push_back(w);
  }
  if (words.empty() || words[0] != kMagic) {
    fail(ErrorCode::kInvalidUsage,
         "rank descriptor: field 'version': expected '{}' first, got '{}'", kMagic,
         words.empty() ? std::string() : words[0].substr(0, 40));
  }
  RankDescriptor d;
  bool seenHost = false;
  for (size_t i = 1; i < words.size(); ++i) {
    auto kv = text::keyValue(words[i]);
    if (!kv) bad("?", words[i], "is not key=value");
    const auto& [key, raw] = *kv;
    auto value = text::unescape(raw);
    if (!value) bad(key, raw, "has a malformed %XX escape");
    if (key == "host") {
      d.host = *value;
      seenHost = true;
    } else if (key == "hostname") {
      d.hostname = *value;
    } else if (key == "machine") {
      d.machine = *value;
    } else if (key == "cpus") {
      d.cpus = *value;
    } else if (key == "numa") {
      d.numa = toInt(key, *value);
    } else if (key == "gpu") {
      d.gpu = toInt(key, *value);
    } else if (key == "packages") {
      d.packages = toInt(key, *value, 0);
    } else if (key == "numa_nodes") {
      d.numaNodes = toInt(key, *value, 0);
    } else if (key == "cores") {
      d.cores = toInt(key, *value, 0);
    } else if (key == "pus") {
      d.pus = toInt(key, *value, 0);
    } else if (key == "l2") {
      d.l2Bytes = toBytes(key, *value);
    } else if (key == "l3") {
      d.l3Bytes = toBytes(key, *value);
    } else if (key == "l3_count") {
      d.l3Count = toInt(key, *value, 0);
    } else if (key == "hwloc") {
      d.fromHwloc = *value == "1";
    } else if (key == "dev") {
      d.devices.push_back(decodeDevice(raw));
    } else {
      // Newer senders may add fields; an older reader keeps what it knows.
      continue;
    }
  }
  if (!seenHost) bad("host", "", "is missing");
  return d;
}

}  // namespace braid::topology
