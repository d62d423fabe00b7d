// The tcp transport's wire format (transport/tcp/wire.h) as a receiving rank meets it. The first
// input byte picks the reader:
//   even: a connecting peer's handshake, checked like the accept side (tcp/connect.cc,
//         readHandshake()) does (helloError(), then the job id and secret).
//   odd:  the frames of a connected peer, judged like readIn() does (headerError(), then
//         a credit like ChannelEndpoint::onCredit (network/message_wire.h's creditError(): never
//         past what was posted; a lower one is ignored) or dataError() against the link's
//         counters) and their payloads copied into the slots and abort reason the checks sized.
// braid::Error is an expected refusal; anything else that escapes is a finding.
#include <algorithm>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "fuzz/fixture.h"
#include "transport/tcp/wire.h"

namespace tcp = braid::transport::tcp;
namespace fz = braid::fuzz;

namespace {

void handshake(const char* data, size_t size) {
  tcp::Hello hello;
  if (size < sizeof hello) return;  // readHandshake() waits for the rest
  std::memcpy(&hello, data, sizeof hello);
  const std::string why = tcp::helloError(hello, fz::kSize, fz::kRank, [](int peer) -> std::string {
    if (peer < 0 || peer >= fz::kRank) fz::broken("peerProblem asked about a rank out of range");
    if (peer == fz::kNotTcpPeer) return "not a tcp peer";
    if (peer == fz::kConnectedPeer) return "already connected";
    return "";
  });
  if (!why.empty()) return;
  const size_t total = tcp::handshakeBytes(hello);
  if (total > sizeof hello + 2 * tcp::kMaxHandshakeString) fz::broken("handshake unbounded");
  if (size < total) return;
  const std::string jobId(data + sizeof hello, hello.jobIdBytes);
  const std::string secret(data + sizeof hello + hello.jobIdBytes, hello.secretBytes);
  (void)(jobId == fz::kJob && secret == fz::kSecret);
}

// One link's receiving side: kChannels channels of kSlots slots, kPosted messages posted on each
// of our send channels; the user releases a message after every second one arrives.
struct Link {
  std::unique_ptr<char[]> slots[fz::kChannels];
  uint64_t arrived[fz::kChannels] = {};
  uint64_t released[fz::kChannels] = {};
  uint64_t credited[fz::kChannels] = {};
  std::string reason;
};

void frames(const char* data, size_t size) {
  Link link;
  for (auto& s : link.slots) s.reset(new char[fz::kSlots * fz::kSlotBytes]);
  while (size >= sizeof(tcp::FrameHeader)) {
    tcp::FrameHeader h;
    std::memcpy(&h, data, sizeof h);
    data += sizeof h;
    size -= sizeof h;
    if (!tcp::headerError(h, fz::kChannels).empty()) return;  // the link dies
    if (h.type == tcp::kCredit) {
      braid::transport::net::ControlHeader credit;
      credit.type = braid::transport::net::kCredit;
      credit.channel = h.channel;
      credit.value = h.length;
      if (!braid::transport::net::creditError(credit, fz::kChannels, fz::kPosted).empty()) return;
      link.credited[h.channel] = std::max(link.credited[h.channel], h.length);
      continue;
    }
    char* dst;
    if (h.type == tcp::kAbort) {
      link.reason.assign(h.length, '\0');
      dst = link.reason.data();
    } else {
      const uint64_t c = h.channel;
      if (!tcp::dataError(h, fz::kSlotBytes, fz::kSlots, link.arrived[c] - link.released[c])
               .empty()) {
        return;
      }
      dst = link.slots[c].get() + (link.arrived[c] % fz::kSlots) * fz::kSlotBytes;
    }
    if (size < h.length) return;       // the rest never arrives
    std::memcpy(dst, data, h.length);  // what readIn() recv()s into dst
    data += h.length;
    size -= h.length;
    if (h.type == tcp::kData && ++link.arrived[h.channel] % 2 == 0) ++link.released[h.channel];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const fz::Input in = fz::split(bytes, size);
  try {
    if (in.mode % 2 == 0) {
      handshake(in.data, in.size);
    } else {
      frames(in.data, in.size);
    }
  } catch (const braid::Error&) {
  }
  return 0;
}
