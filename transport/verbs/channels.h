// Internal to the verbs transport: queue pairs, per-peer state, per-slot state, shared by verbs.cc
// (setup, user-thread calls), connect.cc and progress.cc (the queue's work).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "transport/network/slot_buffer.h"
#include "transport/network/tagged_channels.h"
#include "transport/verbs/verbs.h"
#include "transport/verbs/wire.h"

namespace braid::transport::verbs {

/// One RC queue pair to a peer. `outstanding`: send queue entries posted and not yet known done
/// (a signaled completion retires every entry before it on the same queue pair).
struct QueuePair {
  ibv_qp* qp = nullptr;
  PeerState* peer = nullptr;
  int index = 0;          // among the peer's queue pairs
  int outstanding = 0;    // send queue entries in use
  int signaledSince = 0;  // unsignaled entries posted since the last signaled one
};

/// One peer (net::ChannelPeer: liveness, hello, last heard and sent). `alive` is read by any
/// thread; the rest belongs to mutex_'s holder.
struct PeerState : net::ChannelPeer {
  std::vector<QueuePair> qps;
  Published theirs;           // what it published for us (connect)
  bool queuePairsUp = false;  // ours to it at RTS, the ready key set (connect)
  AlignedBuffer control;      // the control block (wire.h): in half, then out half
  ibv_mr* controlMr = nullptr;
  int nextQp = 0;  // round robin of messages over the queue pairs
};

/// wr_ids, told apart by their low two bits: 0, a data write's SendSlot (8-byte aligned);
/// 1, a control write and 2, a receive, both (peer rank << 8) | (queue pair << 2) | tag; 3, a
/// chunk before a message's last (unsignaled: it only shows up flushed, and is ignored).
enum WrTag : uint64_t { kWrData = 0, kWrControl = 1, kWrReceive = 2, kWrChunk = 3 };
inline uint64_t wrId(WrTag tag, int peer, int qp) {
  return (static_cast<uint64_t>(peer) << 8) | (static_cast<uint64_t>(qp) << 2) | tag;
}
inline WrTag wrTag(uint64_t id) { return static_cast<WrTag>(id & 3); }
inline int wrPeer(uint64_t id) { return static_cast<int>(id >> 8); }
inline int wrQp(uint64_t id) { return static_cast<int>((id >> 2) & 63); }

struct SendSlot {
  VerbsSendChannel* channel = nullptr;
  /// 1 while a write from this slot is in flight (set and cleared under mutex_).
  std::atomic<uint8_t> busy{0};
  size_t bytes = 0;  // of the write in flight (header + payload), for errors
  int entries = 0;   // send queue entries it took
  QueuePair* qp = nullptr;
};

struct RecvSlot {
  VerbsRecvChannel* channel = nullptr;
  uint32_t index = 0;
  bool posted = true;  // peers write into it: nothing to post
  bool done = false;   // landed, not yet counted in arrived_
};

}  // namespace braid::transport::verbs
