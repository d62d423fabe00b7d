// The ofi transport's wire format: the shared message format (network/message_wire.h: SlotHeader,
// ControlHeader, Hello and their checks) carried as libfabric tagged messages.
//
// Data: one tagged message per posted slot, sent from the sender's slot (SlotHeader + payload)
// into the receive the peer pre-posted for that channel and slot index; the tag names sender,
// channel and slot, so every message lands in exactly one receive and the provider's ordering
// does not matter. Control (hello, credit, region, abort, heartbeat): a ControlHeader and its
// payload as one tagged message with the control bit set and the sender's rank, into one of the
// receives posted for that sender's control messages. Every receive braid posts has an exact tag
// (ignore mask 0): libfabric 1.17's shm provider matches a newly posted receive against the
// messages that arrived before it with a stale ignore mask (the one the unexpected entry's memory
// held in its previous use as a posted receive) instead of the receive's, so a receive for "any
// sender" missed control messages that came early, and a lost credit stalled a channel for good
// (4 ranks on the tagged path: more credits in flight than control receives posted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "transport/network/message_wire.h"

namespace braid::transport::ofi {

// SlotHeader, ControlHeader, Hello, the control types and the receiver's checks.
using namespace ::braid::transport::net;  // NOLINT(google-build-using-namespace)

// Tag layout: control bit (1) | sender rank (23 bits) | channel (16 bits) | slot index (24 bits).
inline constexpr int kMaxRanks = 1 << 23;
inline constexpr int kMaxChannels = 1 << 16;
inline constexpr int kMaxSlots = 1 << 24;
inline constexpr uint64_t kControlBit = uint64_t{1} << 63;

inline uint64_t dataTag(int sender, int channel, int slot) {
  return (static_cast<uint64_t>(sender) << 40) | (static_cast<uint64_t>(channel) << 24) |
         static_cast<uint64_t>(slot);
}
/// The RMA path's immediate (remote CQ data): which receive slot a write filled, as
/// (sender x channels + channel) x slots + slot; it must fit the provider's cq_data_size.
inline uint64_t slotImmediate(int sender, int channel, int slot, int channels, int slots) {
  return (static_cast<uint64_t>(sender) * static_cast<uint64_t>(channels) +
          static_cast<uint64_t>(channel)) *
             static_cast<uint64_t>(slots) +
         static_cast<uint64_t>(slot);
}
inline uint64_t controlTag(int sender) {
  return kControlBit | (static_cast<uint64_t>(sender) << 40);
}

/// The largest control message: a hello with the longest job id and secret.
inline constexpr size_t kControlBytes =
    (sizeof(ControlHeader) + sizeof(Hello) + 2 * kMaxHandshakeString + 63) / 64 * 64;

/// What a rank publishes under "<jobId>/ofi/<rank>": its provider and data path (every rank must
/// use the same), where it runs (host id and pid namespace: peers on this host are checked by
/// pid) and its endpoint's address, as
/// "<provider>|<rma or tagged>|<host id hex>:<pid namespace hex>|<address hex>".
struct Published {
  std::string provider;
  std::string path;     ///< "rma" (slots written with fi_writedata) or "tagged"
  std::string where;    ///< "<host id hex>:<pid namespace hex>"
  std::string address;  ///< the raw fi_getname() bytes
};
std::string encodePublished(const Published& p);
/// nullopt with `why` set when `text` is not such a value.
std::optional<Published> decodePublished(const std::string& text, std::string* why);

}  // namespace braid::transport::ofi
