#include "transport/network/message_wire.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstring>

namespace braid::transport::net {

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
    *why = fmt::format("a control message with a {}-byte header", bytes);
    return std::nullopt;
  }
  std::memcpy(&h, header, sizeof h);
  if (h.magic != kControlMagic || h.rank < 0 || h.rank >= size) {
    *why = fmt::format("a control message (magic {:#x}, rank {})", h.magic, h.rank);
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

std::string helloPayload(const EndpointConfig& config, int target, uint64_t hostId,
                         uint64_t pidNamespace) {
  Hello hello;
  hello.size = config.size;
  hello.target = target;
  hello.jobIdBytes = static_cast<uint32_t>(config.jobId.size());
  hello.secretBytes = static_cast<uint32_t>(config.secret.size());
  hello.pid = static_cast<uint64_t>(getpid());
  hello.pidNamespace = pidNamespace;
  hello.hostId = hostId;
  std::string payload(reinterpret_cast<const char*>(&hello), sizeof hello);
  return payload + config.jobId + config.secret;
}

bool takeHello(const char* data, size_t bytes, const EndpointConfig& config, uint64_t hostId,
               uint64_t pidNamespace, PeerHello* peer, std::string* why) {
  std::optional<HelloPayload> payload = decodeHello(data, bytes, config.size, config.rank, why);
  if (!payload) return false;
  if (payload->jobId != config.jobId || payload->secret != config.secret) {
    *why = "wrong job id or secret";
    return false;
  }
  if (peer->seen) return true;
  const Hello& hello = payload->hello;
  peer->seen = true;
  peer->pid = static_cast<int64_t>(hello.pid);
  peer->local = hello.hostId == hostId && hello.pidNamespace == pidNamespace &&
                pidNamespace != 0 && static_cast<pid_t>(hello.pid) != getpid();
  return true;
}

std::string toHex(const void* data, size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* in = static_cast<const unsigned char*>(data);
  std::string out(bytes * 2, '0');
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kDigits[in[i] >> 4];
    out[2 * i + 1] = kDigits[in[i] & 15];
  }
  return out;
}

bool fromHex(const std::string& text, std::string* out) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.empty() || text.size() % 2 != 0) return false;
  out->assign(text.size() / 2, '\0');
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace braid::transport::net
