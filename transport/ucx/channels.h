// Internal to the ucx transport: per-peer state and the channel objects, shared by ucx.cc (setup,
// user-thread calls) and progress.cc (the progress thread and the UCX callbacks).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "transport/ucx/ucx.h"
#include "transport/ucx/wire.h"

namespace braid::transport::ucx {

/// One peer's endpoint. `alive` is read by any thread; the rest belongs to the worker's owner
/// (hello fields are written before connectPeers() returns and only read afterwards).
struct PeerState : NetworkPeer {
  UcxTransport* owner = nullptr;
  ucp_ep_h ep = nullptr;
  bool helloSeen = false;
  bool helloLocal = false;  // its hello says: same host and pid namespace, another process
  bool peerErrors = true;   // UCP_ERR_HANDLING_MODE_PEER: UCX reports its failure
  bool checkPid = false;    // UCX does not report failures, but peerAlive() may ask the kernel
  int64_t pid = 0;
  std::string reason;  // why it died (worker owner)
};

/// An active message in flight (header and payload must outlive the send).
struct ControlMessage {
  UcxTransport* owner = nullptr;
  PeerState* peer = nullptr;
  ControlHeader header;
  std::string payload;
};

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char[], FreeDeleter>;

inline AlignedBuffer allocateSlots(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  auto* p = static_cast<char*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) fail(ErrorCode::kSystemError, "ucx: cannot allocate {} bytes of slots", bytes);
  return AlignedBuffer(p);
}

/// Per-slot state of a send channel; the user data of its send requests.
struct SendSlot {
  UcxSendChannel* channel = nullptr;
  /// 1 while a send from this slot is in flight (set and cleared by the worker's owner).
  std::atomic<uint8_t> busy{0};
};

/// What a ucx send and receive channel share: the endpoint, the peer, the channel index and K
/// slots of `stride_` bytes (SlotHeader + payload, 64-byte aligned) with a `Slot` state each.
template <class Slot>
struct UcxSlots {
  UcxSlots(UcxTransport* owner, PeerState* peer, const EndpointConfig& c, int channel)
      : owner_(owner),
        peerState_(peer),
        k_(static_cast<uint64_t>(c.slots)),
        slotBytes_(c.slotBytes),
        stride_((kSlotHeaderBytes + c.slotBytes + 63) / 64 * 64),
        slots_(new Slot[c.slots]),
        channel_(channel) {}

  char* slot(uint64_t n) { return buffer_.get() + (n % k_) * stride_; }

  UcxTransport* owner_;
  PeerState* peerState_;
  uint64_t k_;
  size_t slotBytes_;
  size_t stride_;
  AlignedBuffer buffer_;
  std::unique_ptr<Slot[]> slots_;
  int channel_;
};

class UcxSendChannel final : public SendChannel, public UcxSlots<SendSlot> {
 public:
  UcxSendChannel(UcxTransport* owner, PeerState* peer, const EndpointConfig& c, int channel)
      : UcxSlots(owner, peer, c, channel) {
    for (int i = 0; i < c.slots; ++i) slots_[i].channel = this;
  }

  void* tryAcquire() override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    if (p - credited_.load(std::memory_order_acquire) >= k_ ||
        slots_[p % k_].busy.load(std::memory_order_acquire) != 0) {
      owner_->pollSoon();
      if (p - credited_.load(std::memory_order_acquire) >= k_ ||
          slots_[p % k_].busy.load(std::memory_order_acquire) != 0) {
        return nullptr;
      }
    }
    // Allocated on first use so that unused channels cost no memory.
    if (!buffer_) buffer_ = allocateSlots(k_ * stride_);
    return slot(p) + kSlotHeaderBytes;
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(bytes <= slotBytes_, ErrorCode::kInvalidUsage,
                  "ucx post to peer rank {} channel {}: {} bytes exceed the slot size {}", peer(),
                  channel_, bytes, slotBytes_);
    BRAID_ENFORCE(
        buffer_ && p - credited_.load(std::memory_order_acquire) < k_, ErrorCode::kInvalidUsage,
        "ucx post to peer rank {} channel {} without a slot from tryAcquire()", peer(), channel_);
    auto* header = reinterpret_cast<SlotHeader*>(slot(p));
    header->meta = meta;
    header->bytes = bytes;
    header->seq = p;
    posted_.store(p + 1, std::memory_order_release);
    owner_->flushSoon(*peerState_, channel_);
  }

  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peerState_->rank; }

  alignas(64) std::atomic<uint64_t> posted_{0};    // written by the user
  alignas(64) std::atomic<uint64_t> credited_{0};  // written by the worker's owner
  uint64_t issued_ = 0;                            // worker's owner
};

/// Per-slot state of a receive channel; the user data of its receive requests.
struct RecvSlot {
  UcxRecvChannel* channel = nullptr;
  uint32_t index = 0;
  void* request = nullptr;  // the posted receive, until it completes
  bool done = false;        // completed, not yet counted in arrived_
};

class UcxRecvChannel final : public RecvChannel, public UcxSlots<RecvSlot> {
 public:
  UcxRecvChannel(UcxTransport* owner, PeerState* peer, const EndpointConfig& c, int channel)
      : UcxSlots(owner, peer, c, channel) {
    buffer_ = allocateSlots(k_ * stride_);  // the receives are posted into it at once
    for (int i = 0; i < c.slots; ++i) {
      slots_[i].channel = this;
      slots_[i].index = static_cast<uint32_t>(i);
    }
  }

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    if (r == arrived_.load(std::memory_order_acquire)) {
      owner_->pollSoon();
      if (r == arrived_.load(std::memory_order_acquire)) return nullptr;
    }
    const auto* header = reinterpret_cast<const SlotHeader*>(slot(r));
    if (bytes != nullptr) *bytes = header->bytes;
    if (meta != nullptr) *meta = header->meta;
    return slot(r) + kSlotHeaderBytes;
  }

  void release() override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(r < arrived_.load(std::memory_order_acquire), ErrorCode::kInvalidUsage,
                  "ucx release from peer rank {} channel {} with no message peeked", peer(),
                  channel_);
    released_.store(r + 1, std::memory_order_release);
    owner_->flushSoon(*peerState_, channel_);
  }

  int peer() const override { return peerState_->rank; }

  alignas(64) std::atomic<uint64_t> arrived_{0};   // written by the worker's owner
  alignas(64) std::atomic<uint64_t> released_{0};  // written by the user
  uint64_t reposted_ = 0;                          // worker's owner: receives re-posted so far
};

}  // namespace braid::transport::ucx
