#include "transport/verbs/wire.h"

#include <fmt/format.h>

#include <cstring>

namespace braid::transport::verbs {

std::string encodePublished(const Published& p) {
  std::string bytes(reinterpret_cast<const char*>(&p.address), sizeof p.address);
  bytes.append(reinterpret_cast<const char*>(p.qpns.data()), p.qpns.size() * sizeof(uint32_t));
  bytes.append(reinterpret_cast<const char*>(p.regions.data()),
               p.regions.size() * sizeof(SlotRegion));
  return toHex(bytes.data(), bytes.size());
}

std::optional<Published> decodePublished(const std::string& text, const PeerAddress& expect,
                                         std::string* why) {
  std::string bytes;
  Published out;
  if (!fromHex(text, &bytes) || bytes.size() < sizeof(PeerAddress)) {
    *why = fmt::format("'{}' is not a verbs address (hex of at least {} bytes)",
                       text.substr(0, 120), sizeof(PeerAddress));
    return std::nullopt;
  }
  std::memcpy(&out.address, bytes.data(), sizeof out.address);
  const PeerAddress& a = out.address;
  if (a.version != expect.version || a.qps != expect.qps || a.channels != expect.channels ||
      a.slots != expect.slots || a.slotStride != expect.slotStride) {
    *why = fmt::format(
        "it has version {}, {} queue pairs, {} channels, {} slots of {} bytes; this rank version "
        "{}, {}, {}, {} of {} (set BRAID_VERBS_QPS and the communicator's options alike "
        "everywhere)",
        a.version, a.qps, a.channels, a.slots, a.slotStride, expect.version, expect.qps,
        expect.channels, expect.slots, expect.slotStride);
    return std::nullopt;
  }
  const size_t want =
      sizeof(PeerAddress) + a.qps * sizeof(uint32_t) + a.channels * sizeof(SlotRegion);
  if (bytes.size() != want) {
    *why = fmt::format("{} bytes where {} queue pairs and {} channels make {}", bytes.size(), a.qps,
                       a.channels, want);
    return std::nullopt;
  }
  out.qpns.resize(a.qps);
  out.regions.resize(a.channels);
  std::memcpy(out.qpns.data(), bytes.data() + sizeof(PeerAddress), a.qps * sizeof(uint32_t));
  std::memcpy(out.regions.data(), bytes.data() + sizeof(PeerAddress) + a.qps * sizeof(uint32_t),
              a.channels * sizeof(SlotRegion));
  return out;
}

}  // namespace braid::transport::verbs
