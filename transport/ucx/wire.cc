#include "transport/ucx/wire.h"

#include <fmt/format.h>

#include <cstring>

namespace braid::transport::ucx {

std::string slotError(size_t length, const SlotHeader& header, uint64_t expectedSeq) {
  if (length < kSlotHeaderBytes || header.bytes != length - kSlotHeaderBytes ||
      header.seq != expectedSeq) {
    return fmt::format("message of {} bytes (header: {} bytes, seq {})", length, header.bytes,
                       header.seq);
  }
  return "";
}

std::optional<ControlHeader> decodeControlHeader(const void* header, size_t bytes, int size,
                                                 std::string* why) {
  ControlHeader h;
  if (bytes != sizeof h) {
    *why = fmt::format("an active message with a {}-byte header", bytes);
    return std::nullopt;
  }
  std::memcpy(&h, header, sizeof h);
  if (h.magic != kControlMagic || h.rank < 0 || h.rank >= size) {
    *why = fmt::format("an active message (magic {:#x}, rank {})", h.magic, h.rank);
    return std::nullopt;
  }
  return h;
}

std::string creditError(const ControlHeader& h, int channels, uint64_t posted) {
  if (h.channel >= static_cast<uint32_t>(channels)) {
    return fmt::format("credit for channel {} of {}", h.channel, channels);
  }
  if (h.value > posted) {
    return fmt::format("credit {} on channel {} beyond the {} messages posted", h.value, h.channel,
                       posted);
  }
  return "";
}

std::optional<HelloPayload> decodeHello(const char* data, size_t bytes, int size, int rank,
                                        std::string* why) {
  HelloPayload out;
  Hello& hello = out.hello;
  if (bytes < sizeof hello) {
    *why = fmt::format("{} bytes", bytes);
    return std::nullopt;
  }
  std::memcpy(&hello, data, sizeof hello);
  if (hello.version != 1 || hello.size != size || hello.target != rank ||
      hello.jobIdBytes > kMaxHandshakeString || hello.secretBytes > kMaxHandshakeString ||
      bytes != sizeof hello + hello.jobIdBytes + hello.secretBytes) {
    *why = fmt::format("version {}, size {}, target {}, {} bytes", hello.version, hello.size,
                       hello.target, bytes);
    return std::nullopt;
  }
  out.jobId.assign(data + sizeof hello, hello.jobIdBytes);
  out.secret.assign(data + sizeof hello + hello.jobIdBytes, hello.secretBytes);
  return out;
}

}  // namespace braid::transport::ucx
