// The shared-memory layout and the channel objects over it (internal to transport/shm).
//
// Layout: each rank r owns ONE segment, its inbox "/braid-<jobId>-<r>", that shm peers write into:
//
//   page 0    InboxHeader: identity (magic, version, rank, size, channels, slots, slotBytes,
//             pid and pid namespace, for peerAlive)
//             | Doorbell (word + sleeping flag, own 128-byte pair of lines)
//             | AbortRecord (state, peer rank, reason; first writer wins)
//             | ringOffset[size]: where the rings from each peer start (0 = not a shm peer)
//   per shm peer p (page aligned), per channel c: one ring
//             RingControl (consumed counter written by r, read by p; own 128-byte pair)
//             K slots, each: SlotHeader (seq, size, meta, and a copy of a payload of up to 16
//             bytes: 64 bytes) at a 128-byte boundary, payload right after it at +64; a message
//             of up to 16 bytes is read from the header's line alone.
//
// The sender p writes payload, size and meta into slot n % K, then stores seq = n + 1 (release);
// the receiver r waits for seq == head + 1 (acquire) and, on release, stores consumed = head + 1
// (release), which the sender reads only when it believes the ring full. Both then ring the
// other's doorbell if its sleeping flag is set (see transport/doorbell.h).
//
// The segment is sparse: ftruncate allocates nothing; connect() faults in each slot's header and
// first 64 KiB (so latency-bound messages never fault) and the rest of a slot only once a message
// uses it. An inbox's name is unlinked as soon as every rank that maps it
// announced (kv "<jobId>/mapped/<rank>") that it did, by whichever of those ranks gets there first;
// the owner's destructor unlinks it in any case.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "transport/doorbell.h"
#include "transport/line_latency.h"
#include "transport/shm/tsan_edges.h"
#include "transport/transport.h"

namespace braid::transport::shm {

inline constexpr uint64_t kMagic = 0x316d736469617262ull;  // "braidsm1"
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kReasonBytes = 1016;  // with state and rank: 1 KiB
inline constexpr size_t kSlotHeaderBytes = 64;
inline constexpr size_t kControlBytes = 128;

struct AbortRecord {
  uint32_t state;  // 0 empty, 1 being written, 2 published
  int32_t rank;
  char reason[kReasonBytes];
};

// Messages of up to kInlineBytes are also copied next to seq, so a receiver reads a tiny message
// (an 8-byte all-reduce's) from the one line it polls instead of missing once more on the
// payload's.
inline constexpr size_t kInlineBytes = 16;

struct SlotHeader {
  uint64_t seq;   // n + 1 once message n is in this slot
  uint64_t size;  // payload bytes
  MessageMeta meta;
  uint8_t inlined[kInlineBytes];  // the payload again when size <= kInlineBytes
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

inline size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

inline size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

inline size_t slotStride(size_t slotBytes) { return roundUp(kSlotHeaderBytes + slotBytes, 128); }
inline size_t ringBytes(const EndpointConfig& c) {
  return kControlBytes + static_cast<size_t>(c.slots) * slotStride(c.slotBytes);
}
inline size_t peerRegionBytes(const EndpointConfig& c) {
  return roundUp(static_cast<size_t>(c.channels) * ringBytes(c), pageBytes());
}

/// How much of each slot connect() faults in: what latency-bound messages use.
inline constexpr size_t kPrefaultBytes = 64 << 10;
inline size_t prefaultBytes(size_t slotBytes) { return std::min(slotBytes, kPrefaultBytes); }

template <typename T>
inline std::atomic_ref<T> atom(T& value) {
  return std::atomic_ref<T>(value);
}

struct InboxHeader {
  uint64_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  int32_t channels;
  int32_t slots;
  int32_t pad0;
  uint64_t slotBytes;
  uint64_t totalBytes;
  int64_t pid;
  uint64_t pidNamespace;  // a pid means nothing to a rank in another pid namespace
  alignas(128) Doorbell doorbell;
  alignas(128) AbortRecord abort;
  alignas(128) uint64_t ringOffset0;  // first of `size` entries

  uint64_t* ringOffsets() { return &ringOffset0; }
};

/// One ring as both ends see it: the consumed counter and K slots in the receiver's inbox.
struct RingView {
  RingView(char* ring, const EndpointConfig& c, Doorbell* otherBell, int peerRank)
      : control(reinterpret_cast<uint64_t*>(ring)),
        slots(ring + kControlBytes),
        stride(slotStride(c.slotBytes)),
        slotBytes(c.slotBytes),
        k(static_cast<uint64_t>(c.slots)),
        bell(otherBell),
        peer(peerRank) {}

  SlotHeader* slot(uint64_t n) const {
    return reinterpret_cast<SlotHeader*>(slots + (n % k) * stride);
  }
  /// Faults in each slot's header and first prefaultBytes() (write: the sender, which owns size,
  /// meta and payload until it posts; read: the receiver, enough for shmem), so the messages of
  /// a job's first iterations do not each pay page faults in both processes; beyond that a
  /// slot's pages fault once, on first use.
  void prefault(bool write) const {
    atom(*control).load(std::memory_order_relaxed);
    for (uint64_t i = 0; i < k; ++i) {
      char* payload = reinterpret_cast<char*>(slot(i)) + kSlotHeaderBytes;
      for (size_t off = 0; off < prefaultBytes(slotBytes); off += pageBytes()) {
        if (write) {
          payload[off] = 0;
        } else {
          atom(payload[off]).load(std::memory_order_relaxed);
        }
      }
    }
  }

  uint64_t* control;  // the receiver's consumed counter
  char* slots;
  size_t stride;
  size_t slotBytes;
  uint64_t k;
  Doorbell* bell;  // the other end's doorbell
  int peer;
};

class ShmSendChannel final : public SendChannel {
 public:
  ShmSendChannel(char* ring, const EndpointConfig& c, Doorbell* receiverBell, int peer)
      : ring_(ring, c, receiverBell, peer), edge_(ringEdgeId(c.jobId, c.rank, peer)) {
    ring_.prefault(true);
  }

  void* tryAcquire() override {
    if (sent_ - consumed_ >= ring_.k) {
      // The ring looked full, so this thread waits anyway: time the load of the receiver's
      // counter, and keep the sample when the receiver had moved it (line_latency.h). For every
      // message until the window is full, then for every 4th: the clock reads add ~40 ns to the
      // load that finds a free slot, which a stream of tiny messages would pay in full.
      auto load = [&] { return atom(*ring_.control).load(std::memory_order_acquire); };
      if (sent_ % 4 == 0 || !receiverLine_.full()) {
        uint64_t nanos = 0;
        const uint64_t seen = timedLoad(load, &nanos);
        if (seen != consumed_) receiverLine_.add(nanos);
        consumed_ = seen;
      } else {
        consumed_ = load();
      }
      edgeAcquire(edge_ ^ 1);
      if (sent_ - consumed_ >= ring_.k) return nullptr;
    }
    return reinterpret_cast<char*>(ring_.slot(sent_)) + kSlotHeaderBytes;
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    BRAID_ENFORCE(bytes <= ring_.slotBytes, ErrorCode::kInvalidUsage,
                  "shm post to peer rank {}: {} bytes exceed the slot size {}", ring_.peer, bytes,
                  ring_.slotBytes);
    BRAID_ENFORCE(sent_ - consumed_ < ring_.k, ErrorCode::kInvalidUsage,
                  "shm post to peer rank {} without a slot from tryAcquire()", ring_.peer);
    SlotHeader* slot = ring_.slot(sent_);
    slot->size = bytes;
    slot->meta = meta;
    if (bytes <= kInlineBytes) {
      std::memcpy(slot->inlined, reinterpret_cast<char*>(slot) + kSlotHeaderBytes, bytes);
    }
    ++sent_;
    edgeRelease(edge_);
    atom(slot->seq).store(sent_, std::memory_order_release);
    ringDoorbellIfSleeping(*ring_.bell);
  }

  size_t slotBytes() const override { return ring_.slotBytes; }
  int peer() const override { return ring_.peer; }
  uint32_t receiverLineNanos() const override { return receiverLine_.nanos(); }

 private:
  RingView ring_;
  uint64_t edge_;             // tsan_edges.h
  uint64_t sent_ = 0;         // messages posted
  uint64_t consumed_ = 0;     // last seen value of *ring_.control
  LineLatency receiverLine_;  // the counter's line, from the receiver's core
};

class ShmRecvChannel final : public RecvChannel {
 public:
  ShmRecvChannel(char* ring, const EndpointConfig& c, Doorbell* senderBell, int peer)
      : ring_(ring, c, senderBell, peer), edge_(ringEdgeId(c.jobId, peer, c.rank)) {
    ring_.prefault(false);
  }

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    SlotHeader* slot = ring_.slot(head_);
    if (atom(slot->seq).load(std::memory_order_acquire) != head_ + 1) return nullptr;
    edgeAcquire(edge_);
    size_t size = slot->size;
    BRAID_ENFORCE(size <= ring_.slotBytes, ErrorCode::kRemoteError,
                  "shm recv from peer rank {}: message of {} bytes exceeds the slot size {}",
                  ring_.peer, size, ring_.slotBytes);
    if (bytes != nullptr) *bytes = size;
    if (meta != nullptr) *meta = slot->meta;
    if (size <= kInlineBytes) return slot->inlined;
    return reinterpret_cast<char*>(slot) + kSlotHeaderBytes;
  }

  void release() override {
    SlotHeader* slot = ring_.slot(head_);
    BRAID_ENFORCE(atom(slot->seq).load(std::memory_order_acquire) == head_ + 1,
                  ErrorCode::kInvalidUsage, "shm release from peer rank {} with no message peeked",
                  ring_.peer);
    ++head_;
    edgeRelease(edge_ ^ 1);
    atom(*ring_.control).store(head_, std::memory_order_release);
    ringDoorbellIfSleeping(*ring_.bell);
  }

  int peer() const override { return ring_.peer; }

 private:
  RingView ring_;
  uint64_t edge_;      // tsan_edges.h
  uint64_t head_ = 0;  // messages released
};

}  // namespace braid::transport::shm
