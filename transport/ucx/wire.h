// The ucx transport's wire format: the shared message format (network/message_wire.h: SlotHeader,
// ControlHeader, Hello and their checks) carried by UCX.
//
// Data: one tagged message per posted slot, sent from the sender's slot (SlotHeader + payload)
// into the receiver's pre-posted receive for that channel and slot index. The tag names sender,
// channel and slot, so every message lands in exactly one receive and ordering inside UCX does not
// matter. Control (hello, credit, abort): active messages with id kAmControl, a ControlHeader as
// the AM header and an optional payload.
#pragma once

#include <cstdint>

#include "transport/network/message_wire.h"

namespace braid::transport::ucx {

// SlotHeader, ControlHeader, Hello, the control types and the receiver's checks.
using namespace ::braid::transport::net;  // NOLINT(google-build-using-namespace)

// Tag layout: sender rank (24 bits) | channel (16 bits) | slot index (24 bits).
inline constexpr int kMaxRanks = 1 << 24;
inline constexpr int kMaxChannels = 1 << 16;
inline constexpr int kMaxSlots = 1 << 24;
inline constexpr uint64_t kFullTagMask = ~uint64_t{0};

inline uint64_t dataTag(int sender, int channel, int slot) {
  return (static_cast<uint64_t>(sender) << 40) | (static_cast<uint64_t>(channel) << 24) |
         static_cast<uint64_t>(slot);
}

inline constexpr unsigned kAmControl = 7;

}  // namespace braid::transport::ucx
