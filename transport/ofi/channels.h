// Internal to the ofi transport: per-peer state, operation contexts and the channel objects,
// shared by ofi.cc (setup, user-thread calls), connect.cc and progress.cc (the queue's work).
#pragma once

#include <rdma/fabric.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "transport/network/slot_buffer.h"
#include "transport/network/tagged_channels.h"
#include "transport/ofi/ofi.h"
#include "transport/ofi/wire.h"

namespace braid::transport::ofi {

/// One peer (net::ChannelPeer: liveness, hello, last heard and sent). `alive` is read by any
/// thread; the rest belongs to mutex_'s holder.
struct PeerState : net::ChannelPeer {
  fi_addr_t address = FI_ADDR_UNSPEC;  // in the address vector, once connectPeers inserted it
  /// The RMA path: where our writes to it go, per channel (its kRegion messages).
  struct Region {
    uint64_t address = 0;  // of slot 0: a virtual address or an offset (FI_MR_VIRT_ADDR or not)
    uint64_t key = 0;
    bool known = false;
  };
  std::vector<Region> regions;
  int regionsKnown = 0;
};

/// The context of every libfabric operation: an fi_context2 first (providers with FI_CONTEXT
/// or FI_CONTEXT2 use it), then what completed.
struct OpContext {
  enum Op : uint8_t { kSend, kRecv, kControlSend, kControlRecv };
  fi_context2 provider{};
  Op op = kSend;
  uint32_t index = 0;     // slot or control buffer
  void* owner = nullptr;  // the channel (kSend, kRecv)
};

struct SendSlot {
  OfiSendChannel* channel = nullptr;
  OpContext context;
  /// 1 while a send from this slot is in flight (set and cleared under mutex_).
  std::atomic<uint8_t> busy{0};
  size_t bytes = 0;  // of the send in flight, for errors
};

struct RecvSlot {
  OfiRecvChannel* channel = nullptr;
  OpContext context;
  uint32_t index = 0;
  bool posted = false;  // a receive is posted into it
  bool done = false;    // completed, not yet counted in arrived_
};

/// The control messages' buffers, registered once: `receives` posted for control messages, each
/// for one peer (`recvPeers`: its sender's rank; the tag is exact, see wire.h), `sends` for the
/// ones in flight. Queued: control messages waiting for a free send buffer (or for the provider
/// to take them); unposted: receives the provider refused for now (-FI_EAGAIN), retried.
struct ControlPool {
  struct Queued {
    PeerState* peer;
    std::string bytes;  // ControlHeader + payload
  };
  ControlPool(std::vector<int> receivesFrom, int sends)
      : recvCount(static_cast<int>(receivesFrom.size())),
        sendCount(sends),
        memory(allocateSlots(kControlBytes * (receivesFrom.size() + sends), "ofi")),
        recvPeers(std::move(receivesFrom)),
        recvContexts(static_cast<size_t>(recvCount)),
        sendContexts(static_cast<size_t>(sends)),
        sendPeers(static_cast<size_t>(sends), nullptr) {
    for (int i = 0; i < recvCount; ++i) {
      recvContexts[i].op = OpContext::kControlRecv;
      recvContexts[i].index = static_cast<uint32_t>(i);
    }
    for (int i = 0; i < sends; ++i) {
      sendContexts[i].op = OpContext::kControlSend;
      sendContexts[i].index = static_cast<uint32_t>(i);
      freeSends.push_back(static_cast<uint32_t>(i));
    }
  }
  char* recvBuffer(uint32_t i) { return memory.get() + kControlBytes * i; }
  char* sendBuffer(uint32_t i) { return memory.get() + kControlBytes * (recvCount + i); }
  size_t bytes() const { return kControlBytes * static_cast<size_t>(recvCount + sendCount); }

  int recvCount, sendCount;
  AlignedBuffer memory;
  void* desc = nullptr;
  std::vector<int> recvPeers;  // the sender each receive is posted for
  std::vector<OpContext> recvContexts, sendContexts;
  std::vector<PeerState*> sendPeers;  // the peer of each send in flight
  std::vector<uint32_t> freeSends;
  std::deque<Queued> queued;
  std::vector<uint32_t> unposted;
};

}  // namespace braid::transport::ofi
