// The channels of the network backends (tcp, ucx, ofi, verbs): each slot goes as one message into
// a receive the peer pre-posted for it (ucx, ofi tagged) or straight into the peer's slot (ofi
// RMA, verbs: a remote write; tcp: a frame its reader copies into the slot): K slots of SlotHeader + payload per channel and the credit
// counters. A sender posts at most K messages not yet released by the receiver; the receiver
// re-posts a slot's receive when it is released and sends the cumulative released count back as
// a credit. Who issues sends and re-posts receives is the backend's `Owner` (a ChannelEndpoint,
// channel_endpoint.h, whose pump does it over net.h's calls):
//   owner->flushSoon(peer, channel)   after a post or a release (the user's thread);
//   owner->pollSoon()                 tryAcquire/tryPeek found nothing (may progress once);
//   owner->slotsAllocated(buf, n, r)  a channel's slot memory exists (ofi registers it; `r`: the
//                                     receive side, which peers may write into), returns the
//                                     descriptor its operations pass (or nullptr);
//   Owner::kName                      the backend's name in errors.
// `Slot`s are the backend's per-slot state (SendSlot, RecvSlot); each has a `channel` pointer.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "transport/network/message_wire.h"
#include "transport/network/slot_buffer.h"
#include "transport/transport.h"

namespace braid::transport {

/// What a send and a receive channel share: the endpoint, the peer, the channel index and K
/// slots of `stride_` bytes (SlotHeader + payload, 64-byte aligned) with a `Slot` state each.
template <class Owner, class Peer, class Slot>
struct TaggedSlots {
  TaggedSlots(Owner* owner, Peer* peer, const EndpointConfig& c, int channel)
      : owner_(owner),
        peerState_(peer),
        k_(static_cast<uint64_t>(c.slots)),
        slotBytes_(c.slotBytes),
        stride_((net::kSlotHeaderBytes + c.slotBytes + 63) / 64 * 64),
        slots_(new Slot[c.slots]),
        channel_(channel) {}

  char* slot(uint64_t n) { return buffer_.get() + (n % k_) * stride_; }
  void allocate(bool receiving) {
    buffer_ = allocateSlots(k_ * stride_, Owner::kName);
    desc_ = owner_->slotsAllocated(buffer_.get(), k_ * stride_, receiving);
  }

  Owner* owner_;
  Peer* peerState_;
  uint64_t k_;
  size_t slotBytes_;
  size_t stride_;
  AlignedBuffer buffer_;
  void* desc_ = nullptr;  // the slots' memory-registration descriptor (ofi), else nullptr
  std::unique_ptr<Slot[]> slots_;
  int channel_;
};

template <class Owner, class Peer, class Slot>
class TaggedSendChannel final : public SendChannel, public TaggedSlots<Owner, Peer, Slot> {
  using Base = TaggedSlots<Owner, Peer, Slot>;

 public:
  TaggedSendChannel(Owner* owner, Peer* peer, const EndpointConfig& c, int channel)
      : Base(owner, peer, c, channel) {
    for (int i = 0; i < c.slots; ++i) this->slots_[i].channel = this;
  }

  void* tryAcquire() override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    if (!free(p)) {
      this->owner_->pollSoon();
      if (!free(p)) return nullptr;
    }
    // Allocated on first use so that unused channels cost no memory.
    if (!this->buffer_) this->allocate(false);
    return this->slot(p) + net::kSlotHeaderBytes;
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(bytes <= this->slotBytes_, ErrorCode::kInvalidUsage,
                  "{} post to peer rank {} channel {}: {} bytes exceed the slot size {}",
                  Owner::kName, peer(), this->channel_, bytes, this->slotBytes_);
    BRAID_ENFORCE(this->buffer_ && p - credited_.load(std::memory_order_acquire) < this->k_,
                  ErrorCode::kInvalidUsage,
                  "{} post to peer rank {} channel {} without a slot from tryAcquire()",
                  Owner::kName, peer(), this->channel_);
    auto* header = reinterpret_cast<net::SlotHeader*>(this->slot(p));
    header->meta = meta;
    header->bytes = bytes;
    header->seq = p;
    posted_.store(p + 1, std::memory_order_release);
    this->owner_->flushSoon(*this->peerState_, this->channel_);
  }

  size_t slotBytes() const override { return this->slotBytes_; }
  int peer() const override { return this->peerState_->rank; }

  alignas(64) std::atomic<uint64_t> posted_{0};    // written by the user
  alignas(64) std::atomic<uint64_t> credited_{0};  // written by the owner of the network
  uint64_t issued_ = 0;                            // owner of the network

 private:
  // Message p's slot is free: credited, and its previous send completed.
  bool free(uint64_t p) const {
    return p - credited_.load(std::memory_order_acquire) < this->k_ &&
           this->slots_[p % this->k_].busy.load(std::memory_order_acquire) == 0;
  }
};

template <class Owner, class Peer, class Slot>
class TaggedRecvChannel final : public RecvChannel, public TaggedSlots<Owner, Peer, Slot> {
  using Base = TaggedSlots<Owner, Peer, Slot>;

 public:
  TaggedRecvChannel(Owner* owner, Peer* peer, const EndpointConfig& c, int channel)
      : Base(owner, peer, c, channel) {
    this->allocate(true);  // the receives are posted into it at once
    for (int i = 0; i < c.slots; ++i) {
      this->slots_[i].channel = this;
      this->slots_[i].index = static_cast<uint32_t>(i);
    }
  }

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    if (r == arrived_.load(std::memory_order_acquire)) {
      this->owner_->pollSoon();
      if (r == arrived_.load(std::memory_order_acquire)) return nullptr;
    }
    const auto* header = reinterpret_cast<const net::SlotHeader*>(this->slot(r));
    if (bytes != nullptr) *bytes = header->bytes;
    if (meta != nullptr) *meta = header->meta;
    return this->slot(r) + net::kSlotHeaderBytes;
  }

  void release() override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(r < arrived_.load(std::memory_order_acquire), ErrorCode::kInvalidUsage,
                  "{} release from peer rank {} channel {} with no message peeked", Owner::kName,
                  peer(), this->channel_);
    released_.store(r + 1, std::memory_order_release);
    this->owner_->flushSoon(*this->peerState_, this->channel_);
  }

  int peer() const override { return this->peerState_->rank; }

  /// The receive into slot `index` completed with `length` bytes (owner of the network): "" and
  /// arrived_ moved over every slot completed in order, or why the message breaks the protocol
  /// (its size or sequence number).
  std::string arrive(uint32_t index, size_t length) {
    const uint64_t k = this->k_;
    uint64_t arrived = arrived_.load(std::memory_order_relaxed);
    const uint64_t seq = net::expectedSeq(arrived, index, k);
    const auto* header = reinterpret_cast<const net::SlotHeader*>(this->slot(index));
    if (std::string why = net::slotError(length, *header, seq); !why.empty()) {
      return fmt::format("{} on channel {} slot {}, expected seq {}", why, this->channel_, index,
                         seq);
    }
    this->slots_[index].done = true;
    while (this->slots_[arrived % k].done) {
      this->slots_[arrived % k].done = false;
      ++arrived;
    }
    arrived_.store(arrived, std::memory_order_release);
    return "";
  }

  /// A peer's remote write filled slot `index` (ofi's RMA path, verbs): its header says how many
  /// bytes came; then as arrive().
  std::string arriveWritten(uint32_t index) {
    const auto* header = reinterpret_cast<const net::SlotHeader*>(this->slot(index));
    if (header->bytes > this->slotBytes_) {
      return fmt::format("a remote write into channel {} slot {} says {} bytes (slots hold {})",
                         this->channel_, index, header->bytes, this->slotBytes_);
    }
    return arrive(index, net::kSlotHeaderBytes + header->bytes);
  }

  alignas(64) std::atomic<uint64_t> arrived_{0};   // written by the owner of the network
  alignas(64) std::atomic<uint64_t> released_{0};  // written by the user
  uint64_t reposted_ = 0;  // owner of the network: receives re-armed (net.h's irecv took them)
  uint64_t returned_ = 0;  // owner of the network: the count the last credit sent said
};

/// A kCredit control message `h` for this rank's send channels `sends` (by peer rank x
/// `channels` + channel; null for other kinds): "" when acceptable (credited_ raised; *raised
/// says whether it moved), else why it breaks the protocol (owner of the network).
template <class Channel>
std::string takeCredit(const std::vector<std::unique_ptr<Channel>>& sends, int channels,
                       const net::ControlHeader& h, bool* raised) {
  *raised = false;
  Channel* sc = h.channel < static_cast<uint32_t>(channels)
                    ? sends[static_cast<size_t>(h.rank) * channels + h.channel].get()
                    : nullptr;
  std::string why =
      net::creditError(h, channels, sc ? sc->posted_.load(std::memory_order_acquire) : 0);
  if (why.empty() && h.value > sc->credited_.load(std::memory_order_relaxed)) {
    sc->credited_.store(h.value, std::memory_order_release);
    *raised = true;
  }
  return why;
}

}  // namespace braid::transport
