// The host-side control plane of the CUDA IPC transport: one shared-memory segment per job
// holding every rank's doorbell, liveness and abort record, and for every directed pair and
// channel a ring of K slot descriptors. The payload slots themselves are device memory owned by
// the receiver (see cuda_ipc.h); only counters and message headers live here, so the protocol is
// plain CPU atomics and is unit-tested without a GPU.
//
// Ring protocol (one sender, one receiver, K slots, counters only grow):
//   sender:   free slot when head - tail < K; fill device slot head % K (kernel finished);
//             write desc[head % K] = {bytes, meta}; head = head + 1 (release); ring receiver.
//   receiver: message ready when tail < head (acquire); read desc[tail % K], consume device slot
//             (kernel finished); tail = tail + 1 (release); ring sender.
// Kernels that fill or drain a slot have completed (the executor waits on its stream) before the
// counter moves, so a counter move also orders the device memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/doorbell.h"
#include "transport/transport.h"

namespace braid::transport::cuda_ipc {

inline constexpr uint64_t kSegmentMagic = 0x3163706964696162ull;  // "baidipc1"
inline constexpr size_t kReasonBytes = 960;

/// Counters of one ring, each on its own cache line pair (sender and receiver write different
/// lines).
struct RingControl {
  alignas(128) uint64_t head;  ///< messages posted (sender)
  alignas(128) uint64_t tail;  ///< messages released (receiver)
};

/// What the sender posts beside the payload.
struct SlotDesc {
  uint64_t bytes;
  MessageMeta meta;
};

/// Per-rank record: doorbell, liveness and the first abort this rank signalled.
struct alignas(64) RankControl {
  Doorbell bell;
  uint64_t pid;
  uint64_t pidNamespace;
  uint32_t abortState;  ///< 0 none, 1 being written, 2 published
  uint32_t closing;     ///< 1 once the rank frees its inbox: peers must not write it any more
  char reason[kReasonBytes];
};

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t channels;
  uint32_t slots;
  uint32_t attached;  ///< ranks that mapped the segment; the last one unlinks its name
};

template <typename T>
inline std::atomic_ref<T> atom(T& value) {
  return std::atomic_ref<T>(value);
}

/// Offsets of everything in the segment for (nranks, channels, slots).
struct Layout {
  uint32_t nranks = 1, channels = 1, slots = 2;

  size_t ranksOffset() const { return sizeof(SegmentHeader); }
  size_t ringsOffset() const {
    return (ranksOffset() + nranks * sizeof(RankControl) + 127) / 128 * 128;
  }
  size_t ringCount() const { return size_t(nranks) * nranks * channels; }
  size_t descsOffset() const { return ringsOffset() + ringCount() * sizeof(RingControl); }
  size_t totalBytes() const {
    size_t end = descsOffset() + ringCount() * slots * sizeof(SlotDesc);
    return (end + 4095) / 4096 * 4096;
  }
  /// Ring index of sender -> receiver on `channel`.
  size_t ring(int sender, int receiver, int channel) const {
    return (size_t(sender) * nranks + receiver) * channels + channel;
  }

  SegmentHeader* header(void* base) const { return static_cast<SegmentHeader*>(base); }
  RankControl* rank(void* base, int r) const {
    return reinterpret_cast<RankControl*>(static_cast<char*>(base) + ranksOffset()) + r;
  }
  RingControl* control(void* base, size_t ring) const {
    return reinterpret_cast<RingControl*>(static_cast<char*>(base) + ringsOffset()) + ring;
  }
  SlotDesc* descs(void* base, size_t ring) const {
    return reinterpret_cast<SlotDesc*>(static_cast<char*>(base) + descsOffset()) + ring * slots;
  }
};

/// Sender's view of one ring. Not thread-safe (one endpoint thread), counters are.
class RingSender {
 public:
  RingSender(RingControl* control, SlotDesc* descs, uint32_t slots)
      : control_(control), descs_(descs), slots_(slots) {}
  /// Index of the next free slot, or -1 when all K are posted and not yet released.
  int64_t tryAcquire() {
    const uint64_t head = atom(control_->head).load(std::memory_order_relaxed);
    if (head - cachedTail_ >= slots_) {
      cachedTail_ = atom(control_->tail).load(std::memory_order_acquire);
      if (head - cachedTail_ >= slots_) return -1;
    }
    return static_cast<int64_t>(head % slots_);
  }
  /// Publishes the slot tryAcquire() returned.
  void post(size_t bytes, const MessageMeta& meta) {
    const uint64_t head = atom(control_->head).load(std::memory_order_relaxed);
    SlotDesc& d = descs_[head % slots_];
    d.bytes = bytes;
    d.meta = meta;
    atom(control_->head).store(head + 1, std::memory_order_release);
  }

 private:
  RingControl* control_;
  SlotDesc* descs_;
  uint32_t slots_;
  uint64_t cachedTail_ = 0;
};

/// Receiver's view of one ring.
class RingReceiver {
 public:
  RingReceiver(RingControl* control, SlotDesc* descs, uint32_t slots)
      : control_(control), descs_(descs), slots_(slots) {}
  /// Index of the oldest posted, unreleased slot (its descriptor in *desc), or -1.
  int64_t tryPeek(SlotDesc* desc) {
    const uint64_t tail = atom(control_->tail).load(std::memory_order_relaxed);
    if (cachedHead_ <= tail) {
      cachedHead_ = atom(control_->head).load(std::memory_order_acquire);
      if (cachedHead_ <= tail) return -1;
    }
    *desc = descs_[tail % slots_];
    return static_cast<int64_t>(tail % slots_);
  }
  /// Frees the slot tryPeek() returned.
  void release() {
    const uint64_t tail = atom(control_->tail).load(std::memory_order_relaxed);
    atom(control_->tail).store(tail + 1, std::memory_order_release);
  }

 private:
  RingControl* control_;
  SlotDesc* descs_;
  uint32_t slots_;
  uint64_t cachedHead_ = 0;
};

}  // namespace braid::transport::cuda_ipc
