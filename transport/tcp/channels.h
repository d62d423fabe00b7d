// Internal to the tcp transport: per-peer connection state and the channel objects, shared by
// tcp.cc (setup, user-thread calls), connect.cc (handshake) and progress.cc (the progress thread).
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/tcp/tcp.h"
#include "transport/tcp/wire.h"

namespace braid::transport::tcp {

/// Size and header of a message in a slot.
struct SlotInfo {
  uint64_t size = 0;
  MessageMeta meta;
};

/// strerror_r as a std::string.
inline std::string errnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof buf);
}

/// One peer's connection. The output state is guarded by `mutex` (the progress thread and, for an
/// inline flush after post/release, the user thread write); the input state belongs to the
/// progress thread.
struct PeerLink : NetworkPeer {
  int fd = -1;
  std::mutex mutex;
  bool finSent = false;
  // A send failed (the peer closed or reset): nothing more is written, but the link stays alive
  // until the reader has taken in what the peer sent before and then sees the end, so that a peer
  // that posted its last messages and left is still heard in full.
  bool sendFailed = false;
  bool wantOut = false;  // EPOLLOUT registered: the socket buffer was full
  // Output: control frames (credits, abort) go between data frames.
  std::string control;
  size_t controlOff = 0;
  bool inFrame = false;
  int frameChannel = 0;
  FrameHeader frame;
  size_t frameOff = 0;
  int nextChannel = 0;
  // Input.
  FrameHeader inHeader;
  size_t inHeaderGot = 0;
  bool inBody = false;
  char* inDst = nullptr;
  size_t inBodyGot = 0;
  std::string reason;
};

/// What a tcp send and receive channel share: the endpoint, the peer's link and K slots of
/// `slotBytes_` with their sizes and headers (allocated on first use, so that unused channels
/// cost no memory; new char[] leaves the pages untouched).
struct TcpSlots {
  TcpSlots(TcpTransport* owner, PeerLink* link, const EndpointConfig& c, int peer)
      : owner_(owner),
        link_(link),
        k_(static_cast<uint64_t>(c.slots)),
        slotBytes_(c.slotBytes),
        info_(c.slots),
        peer_(peer) {}

  char* slot(uint64_t n) { return buffer_.get() + (n % k_) * slotBytes_; }
  void allocate() {
    if (!buffer_) buffer_.reset(new char[k_ * slotBytes_]);
  }

  TcpTransport* owner_;
  PeerLink* link_;
  uint64_t k_;
  size_t slotBytes_;
  std::unique_ptr<char[]> buffer_;
  std::vector<SlotInfo> info_;
  int peer_;
};

class TcpSendChannel final : public SendChannel, public TcpSlots {
 public:
  TcpSendChannel(TcpTransport* owner, PeerLink* link, const EndpointConfig& c, int peer)
      : TcpSlots(owner, link, c, peer) {}

  void* tryAcquire() override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    if (p - credited_.load(std::memory_order_acquire) >= k_) return nullptr;
    allocate();
    return slot(p);
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    uint64_t p = posted_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(bytes <= slotBytes_, ErrorCode::kInvalidUsage,
                  "tcp post to peer rank {}: {} bytes exceed the slot size {}", peer_, bytes,
                  slotBytes_);
    BRAID_ENFORCE(buffer_ && p - credited_.load(std::memory_order_acquire) < k_,
                  ErrorCode::kInvalidUsage,
                  "tcp post to peer rank {} without a slot from tryAcquire()", peer_);
    info_[p % k_] = {bytes, meta};
    posted_.store(p + 1, std::memory_order_release);
    owner_->flushSoon(*link_);
  }

  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peer_; }

  alignas(64) std::atomic<uint64_t> posted_{0};    // written by the user
  alignas(64) std::atomic<uint64_t> credited_{0};  // written by the progress thread
  uint64_t written_ = 0;                           // frames fully sent; under the link's mutex
};

/// Its buffer is allocated by the progress thread on the first frame.
class TcpRecvChannel final : public RecvChannel, public TcpSlots {
 public:
  TcpRecvChannel(TcpTransport* owner, PeerLink* link, const EndpointConfig& c, int peer)
      : TcpSlots(owner, link, c, peer) {}

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    if (r == arrived_.load(std::memory_order_acquire)) return nullptr;
    const SlotInfo& info = info_[r % k_];
    if (bytes != nullptr) *bytes = info.size;
    if (meta != nullptr) *meta = info.meta;
    return slot(r);
  }

  void release() override {
    uint64_t r = released_.load(std::memory_order_relaxed);
    BRAID_ENFORCE(r < arrived_.load(std::memory_order_acquire), ErrorCode::kInvalidUsage,
                  "tcp release from peer rank {} with no message peeked", peer_);
    released_.store(r + 1, std::memory_order_release);
    if (r + 1 - creditsSent_.load(std::memory_order_relaxed) >= creditBatch_) {
      owner_->flushSoon(*link_);
    }
  }

  int peer() const override { return peer_; }

  // Releases per credit frame. 1: a released slot must reach the sender even when the receiver
  // then waits on something else (a ring blocked on its own sends would deadlock otherwise).
  // Credits still coalesce while a frame is being written.
  uint64_t creditBatch_ = 1;
  alignas(64) std::atomic<uint64_t> arrived_{0};   // written by the progress thread
  alignas(64) std::atomic<uint64_t> released_{0};  // written by the user
  std::atomic<uint64_t> creditsSent_{0};           // written under the link's mutex
};

}  // namespace braid::transport::tcp
