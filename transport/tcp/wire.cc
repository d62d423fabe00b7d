#include "transport/tcp/wire.h"

#include <fmt/format.h>

namespace braid::transport::tcp {

std::string helloError(const Hello& h, int size, int rank,
                       const std::function<std::string(int)>& peerProblem) {
  if (h.magic != kHelloMagic) return "bad magic (not a braid peer)";
  if (h.version != kProtocolVersion) {
    return fmt::format("protocol version {} (this rank speaks {})", h.version, kProtocolVersion);
  }
  if (h.size != size) return fmt::format("world size {} (this job has {})", h.size, size);
  if (h.target != rank) return fmt::format("it wants rank {}", h.target);
  if (h.rank < 0 || h.rank >= rank) {
    return fmt::format("rank {} is not a tcp peer that connects to rank {}", h.rank, rank);
  }
  if (std::string why = peerProblem(h.rank); !why.empty()) return why;
  if (h.jobIdBytes > kMaxHandshakeString || h.secretBytes > kMaxHandshakeString) {
    return "oversized job id or secret";
  }
  return "";
}

std::string headerError(const FrameHeader& h, int channels) {
  if (h.type != kData && h.type != kCredit && h.type != kAbort) {
    return fmt::format("unknown frame type {}", h.type);
  }
  if (h.type != kAbort && h.channel >= static_cast<uint32_t>(channels)) {
    return fmt::format("frame for channel {} of {}", h.channel, channels);
  }
  if (h.type == kAbort && h.length > kMaxAbortReason) {
    return fmt::format("abort reason of {} bytes", h.length);
  }
  return "";
}

std::string dataError(const FrameHeader& h, uint64_t slotBytes, uint64_t slots, uint64_t inFlight) {
  if (h.length > slotBytes) {
    return fmt::format("frame of {} bytes on channel {} exceeds the slot size {}", h.length,
                       h.channel, slotBytes);
  }
  if (inFlight >= slots) {
    return fmt::format("more than {} messages in flight on channel {}", slots, h.channel);
  }
  return "";
}

}  // namespace braid::transport::tcp
