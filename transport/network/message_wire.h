// The message format the tagged-message backends (ucx, ofi) share (host byte order: all ranks of
// a job share an architecture): a data message is one slot, SlotHeader + payload, sent from the
// sender's slot into the receive the peer pre-posted for that channel and slot; control messages
// (hello, credit, abort, heartbeat) are a ControlHeader plus an optional payload (the hello fields
// plus jobId and secret, or the abort reason). How each backend carries them (tags, active
// messages) is its own wire.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "transport/transport.h"

namespace braid::transport::net {

/// Bytes in front of every slot's payload; keeps the payload 64-byte aligned.
inline constexpr size_t kSlotHeaderBytes = 64;

struct SlotHeader {
  MessageMeta meta;
  uint64_t bytes = 0;  ///< payload bytes that follow the header
  uint64_t seq = 0;    ///< message number on its channel (checked by the receiver)
  uint64_t pad[2] = {0, 0};
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

inline constexpr uint32_t kControlMagic = 0x3174656e;  // "net1"
inline constexpr uint32_t kMaxAbortReason = 1024;
inline constexpr uint32_t kMaxHandshakeString = 1024;  ///< bound on jobId and secret lengths

/// kHeartbeat: "still here" (ofi, whose peers between hosts are seen dead by their silence).
/// kRegion: where a receive channel's slots are for remote writes (ofi's RMA path): channel,
/// value = the key, payload = the 8-byte address of slot 0 (an offset where the provider
/// addresses by offset).
enum ControlType : uint32_t { kHello = 1, kCredit = 2, kAbort = 3, kHeartbeat = 4, kRegion = 5 };

struct ControlHeader {
  uint32_t magic = kControlMagic;
  uint32_t type = 0;
  int32_t rank = 0;      ///< the sender
  uint32_t channel = 0;  ///< kCredit: the channel whose slots were released
  uint64_t value = 0;    ///< kCredit: messages released so far on that channel
};
static_assert(sizeof(ControlHeader) == 24);

/// The kHello payload, followed by jobId and secret bytes.
struct Hello {
  uint32_t version = 1;
  int32_t size = 0;    ///< world size
  int32_t target = 0;  ///< the rank it means to reach
  uint32_t jobIdBytes = 0;
  uint32_t secretBytes = 0;
  uint32_t pad = 0;
  uint64_t pid = 0;           ///< for the same-host liveness check
  uint64_t pidNamespace = 0;  ///< inode of /proc/self/ns/pid (0 unknown)
  uint64_t hostId = 0;        ///< hash of hostname and boot id
};
static_assert(sizeof(Hello) == 48);

// What a receiver checks, as pure functions of the bytes and its counters (message_wire.cc,
// which needs no network library). Each says why the input is refused, or "" / a value when it
// is acceptable.

/// The seq a message landing in receive slot `index` must carry when `arrived` messages arrived in
/// order so far on a channel of `slots` slots: the slot's next use at or after `arrived`.
inline uint64_t expectedSeq(uint64_t arrived, uint64_t index, uint64_t slots) {
  return arrived + (index + slots - arrived % slots) % slots;
}
/// A received data message of `length` bytes whose slot begins with `header`.
std::string slotError(size_t length, const SlotHeader& header, uint64_t expectedSeq);

/// A control message's header as a ControlHeader from a rank of a job of `size` ranks; nullopt
/// with `why` set when it is no braid control message (size, magic or sender wrong).
std::optional<ControlHeader> decodeControlHeader(const void* header, size_t bytes, int size,
                                                 std::string* why);
/// A kCredit message for our send channel of `channels` with `posted` messages posted.
std::string creditError(const ControlHeader& h, int channels, uint64_t posted);

/// A kHello payload, checked against this rank and job.
struct HelloPayload {
  Hello hello;
  std::string jobId;
  std::string secret;
};
/// The kHello payload of `bytes` bytes sent to `rank` of `size`; nullopt with `why` set when its
/// fields or length are wrong. (jobId and secret are compared by the caller.)
std::optional<HelloPayload> decodeHello(const char* data, size_t bytes, int size, int rank,
                                        std::string* why);

/// The kHello payload this process sends to rank `target` of `config`'s job: the Hello fields
/// (this pid, `hostId`, `pidNamespace`), then the job id and secret.
std::string helloPayload(const EndpointConfig& config, int target, uint64_t hostId,
                         uint64_t pidNamespace);

/// What a peer's hello said: that it came, the peer's pid, and whether it runs on this host in
/// this pid namespace as another process (then the kernel can say whether it is gone).
struct PeerHello {
  bool seen = false;
  int64_t pid = 0;
  bool local = false;
};
/// A kHello payload for this rank of `config`'s job (decodeHello's checks, then job id and
/// secret), recorded into `peer` (the first counts; `hostId`, `pidNamespace`: this process's).
/// false with `why` set when it is refused ("wrong job id or secret", or decodeHello's reason).
bool takeHello(const char* data, size_t bytes, const EndpointConfig& config, uint64_t hostId,
               uint64_t pidNamespace, PeerHello* peer, std::string* why);

/// An address as published in the kv store: lower-case hex, two digits a byte; fromHex() is
/// false for an empty, odd-length or non-hex text.
std::string toHex(const void* data, size_t bytes);
bool fromHex(const std::string& text, std::string* out);

}  // namespace braid::transport::net
