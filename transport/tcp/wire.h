// The tcp transport's wire format (host byte order: all ranks of a job share an architecture).
//
// Connection: the lower rank connects to the higher one and sends Hello + jobId + secret; the
// acceptor checks every field and answers Ack, or closes the socket. Then both directions carry
// frames: FrameHeader, followed by `length` payload bytes for kData and kAbort. A kCredit frame's
// `length` is the channel's cumulative released count (ChannelEndpoint's credit; checked by
// network/message_wire.h's creditError).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "transport/network/message_wire.h"
#include "transport/transport.h"

namespace braid::transport::tcp {

inline constexpr uint64_t kHelloMagic = 0x3163746469617262ull;  // "braidtc1"
inline constexpr uint64_t kAckMagic = 0x316b636469617262ull;    // "braidck1"
inline constexpr uint32_t kProtocolVersion = 1;
using net::kMaxAbortReason;      ///< bound on an abort frame's reason
using net::kMaxHandshakeString;  ///< bound on jobId and secret lengths

struct Hello {
  uint64_t magic = kHelloMagic;
  uint32_t version = kProtocolVersion;
  int32_t size = 0;    ///< world size
  int32_t rank = 0;    ///< the connecting rank
  int32_t target = 0;  ///< the rank it means to reach
  uint32_t jobIdBytes = 0;
  uint32_t secretBytes = 0;
};
static_assert(sizeof(Hello) == 32);

struct Ack {
  uint64_t magic = kAckMagic;
  int32_t rank = 0;  ///< the accepting rank
  int32_t pad = 0;
};

enum FrameType : uint32_t { kData = 1, kCredit = 2, kAbort = 3 };

struct FrameHeader {
  uint32_t type = 0;
  uint32_t channel = 0;
  uint64_t length = 0;  ///< kData: payload bytes; kCredit: messages released so far; kAbort: text
  MessageMeta meta;
};
static_assert(sizeof(FrameHeader) == 48);

/// Hello followed by the jobId and secret bytes.
inline std::string encodeHello(int size, int rank, int target, const std::string& jobId,
                               const std::string& secret) {
  Hello hello;
  hello.size = size;
  hello.rank = rank;
  hello.target = target;
  hello.jobIdBytes = static_cast<uint32_t>(jobId.size());
  hello.secretBytes = static_cast<uint32_t>(secret.size());
  std::string out(sizeof hello, '\0');
  std::memcpy(out.data(), &hello, sizeof hello);
  return out + jobId + secret;
}

// What a receiver checks, as pure functions of the bytes and its counters (wire.cc). Each returns
// why the peer broke the protocol, or "" when the input is acceptable.

/// A Hello that connects `rank` of a job of `size` ranks. `peerProblem(r)` is asked only for a
/// claimed rank r in [0, rank): why r may not connect now ("" when it may).
std::string helloError(const Hello& hello, int size, int rank,
                       const std::function<std::string(int)>& peerProblem);
/// Bytes of a handshake whose Hello was accepted: the Hello, jobId and secret.
inline size_t handshakeBytes(const Hello& hello) {
  return sizeof(Hello) + size_t{hello.jobIdBytes} + hello.secretBytes;
}

/// A frame header's type, channel (of `channels`) and, for kAbort, reason length.
std::string headerError(const FrameHeader& h, int channels);
/// A kData frame for our receive channel of `slots` slots of `slotBytes` bytes, `inFlight` of
/// them holding messages not yet released.
std::string dataError(const FrameHeader& h, uint64_t slotBytes, uint64_t slots, uint64_t inFlight);

}  // namespace braid::transport::tcp
