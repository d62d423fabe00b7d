// The verbs transport's wire format. Data never passes through a receive buffer: a sender writes
// its slot (network/message_wire.h's SlotHeader + payload) straight into the receiver's slot of the
// same index with RDMA_WRITEs of at most the chunk size, the last one an RDMA_WRITE_WITH_IMM whose
// immediate names the slot, all on one queue pair (RC places them in order, so the immediate's
// completion means the whole slot landed). Control goes the same way into the receiver's control
// block: a credit is the cumulative released count written into the sender's credit word for that
// channel (the receiver's clear-to-send; monotonic, so a late or repeated write is harmless); an
// abort is its reason written into the abort area; a heartbeat writes nothing. Every such write
// carries an immediate, so the peer's completion queue (and its sleeping progress thread) hears it.
//
// What a rank publishes for each peer (the job's KeyValue, "<jobId>/verbs/<rank>/<peer>", hex):
// a PeerAddress, then its queue pair numbers, then where each channel's receive slots are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/network/message_wire.h"

namespace braid::transport::verbs {

// SlotHeader, kSlotHeaderBytes, kMaxAbortReason and the receiver's checks.
using namespace ::braid::transport::net;  // NOLINT(google-build-using-namespace)

// Immediate layout (32 bits): data: bit 31 clear, channel x slots + slot; control: bit 31 set,
// the type in bits 24..30, the channel (credits) below.
inline constexpr uint32_t kControlImm = 1u << 31;
enum ImmType : uint32_t { kImmCredit = 1, kImmAbort = 2, kImmHeartbeat = 3 };
inline constexpr uint32_t kMaxImmChannel = 1u << 24;

inline uint32_t dataImmediate(int channel, int slot, int slots) {
  return static_cast<uint32_t>(channel) * static_cast<uint32_t>(slots) +
         static_cast<uint32_t>(slot);
}
inline uint32_t controlImmediate(ImmType type, uint32_t channel) {
  return kControlImm | (static_cast<uint32_t>(type) << 24) | channel;
}

/// The control block every rank keeps per peer, registered for the peer's remote writes: the
/// credit words of this rank's send channels to it, its abort reason. `out` mirrors `in`: what
/// this rank writes to the peer is read from there (the source of an RDMA_WRITE must be
/// registered memory that stays put until the write completes).
struct ControlBlockLayout {
  explicit ControlBlockLayout(int channels)
      : credits(0),
        abortBytes(8 * static_cast<size_t>(channels)),
        abortText(abortBytes + 8),
        half((abortText + kMaxAbortReason + 63) / 64 * 64) {}
  size_t credits;     ///< uint64_t per channel: messages the peer released on it
  size_t abortBytes;  ///< uint64_t: the abort reason's length
  size_t abortText;   ///< the reason's bytes
  size_t half;        ///< `in` is [0, half), `out` [half, 2 * half)
  size_t bytes() const { return 2 * half; }
};

/// What a rank publishes for one peer, followed by `qps` queue pair numbers (uint32_t) and
/// `channels` SlotRegions.
struct PeerAddress {
  uint32_t version = 1;
  uint32_t qps = 0;
  uint32_t channels = 0;
  uint32_t slots = 0;
  uint64_t slotStride = 0;  ///< bytes between receive slots (SlotHeader + payload, 64-aligned)
  uint16_t lid = 0;
  uint8_t ethernet = 0;  ///< RoCE: reach it by GID
  uint8_t mtu = 0;       ///< ibv_mtu of its port
  uint32_t psn = 0;      ///< the first packet sequence number of its queue pairs
  uint8_t gid[16] = {};
  uint64_t hostId = 0;  ///< hostId(): a peer on this host is checked by pid
  uint64_t pidNamespace = 0;
  uint64_t pid = 0;
  uint64_t controlAddress = 0;  ///< its control block's `in` half (virtual address)
  uint32_t controlKey = 0;      ///< and its rkey
  uint32_t pad = 0;
};
static_assert(sizeof(PeerAddress) == 88);

struct SlotRegion {
  uint64_t address = 0;  ///< slot 0 of the channel's receive slots (virtual address)
  uint32_t key = 0;      ///< their rkey
  uint32_t pad = 0;
};
static_assert(sizeof(SlotRegion) == 16);

struct Published {
  PeerAddress address;
  std::vector<uint32_t> qpns;
  std::vector<SlotRegion> regions;
};
std::string encodePublished(const Published& p);
/// nullopt with `why` set when `text` is not such a value or its shape (queue pairs, channels,
/// slots, slot stride) differs from `expect`'s.
std::optional<Published> decodePublished(const std::string& text, const PeerAddress& expect,
                                         std::string* why);

}  // namespace braid::transport::verbs
