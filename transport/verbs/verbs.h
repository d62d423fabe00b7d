// The verbs transport (ibverbs, reliable-connected queue pairs): 1..BRAID_VERBS_QPS queue pairs per
// peer, the receive slots registered once and written by the peer (RDMA_WRITE chunks finished by
// an RDMA_WRITE_WITH_IMM naming the slot), credits written back by the receiver into the sender's
// control block, one completion queue polled by the progress thread (network/), which sleeps on
// its completion channel. Internal to transport/ (users see transport/transport.h).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/network/channel_endpoint.h"
#include "transport/network/slot_buffer.h"
#include "transport/network/tagged_channels.h"
#include "transport/transport.h"
#include "transport/verbs/device.h"
#include "transport/verbs/wire.h"

namespace braid::transport::verbs {

class VerbsTransport;
struct PeerState;
struct QueuePair;
struct SendSlot;
struct RecvSlot;
using VerbsSendChannel = TaggedSendChannel<VerbsTransport, PeerState, SendSlot>;
using VerbsRecvChannel = TaggedRecvChannel<VerbsTransport, PeerState, RecvSlot>;
using VerbsBase = ChannelEndpoint<VerbsTransport, PeerState, SendSlot, RecvSlot>;

/// The settings a VerbsTransport reads once (BRAID_VERBS_*).
struct Settings {
  int qps = 1;                  ///< BRAID_VERBS_QPS: queue pairs per peer (1..16)
  size_t chunkBytes = 1 << 20;  ///< BRAID_VERBS_CHUNK_BYTES: the largest single RDMA_WRITE
  int timeout = 14;             ///< BRAID_VERBS_TIMEOUT: local ACK timeout, 4.096 us x 2^timeout
  int retry = 7;                ///< BRAID_VERBS_RETRY: retransmissions before IBV_WC_RETRY_EXC_ERR
  double peerTimeout = 30;      ///< BRAID_VERBS_PEER_TIMEOUT: silence that counts as death (s)
};
Settings readSettings(int rank);

/// Connection happens in steps (backend.h):
///   VerbsTransport(config, kv)  opens the device, a protection domain, a completion queue with
///                               its channel, the queue pairs (INIT, receives posted), registers
///                               the receive slots and control blocks, and publishes
///                               "<jobId>/verbs/<rank>/<peer>" for every verbs peer;
///   connectPeers(kv, deadline)  (ChannelEndpoint's, over connect.cc's connect and accept):
///                               each peer's queue pairs to RTR and RTS with its published
///                               numbers, "<jobId>/verbs/<rank>/<peer>/ready" published and the
///                               peer's awaited (no write is issued before the peer's receive
///                               side is up);
///   start(doorbell)             hands the queue to the progress thread.
/// Our own state (issued counts, queue pair occupancy) and every post are under mutex_: taken
/// by the progress thread, or by a user thread that posts or releases (ChannelEndpoint: the pump,
/// flushSoon, pollSoon, the progress thread's hooks, a local peer's death, the teardown's wait,
/// credits, aborts and heartbeats; this class implements network/net.h's calls).
class VerbsTransport final : public VerbsBase {
 public:
  VerbsTransport(const EndpointConfig& config, KeyValue& kv);
  ~VerbsTransport() override;
  Kind kind() const override { return Kind::kVerbs; }

  // connectPeers, send, recv (ChannelEndpoint): the channels to a peer of this kind.
  // peerAlive (ChannelEndpoint): false once a write to it failed (its queue pair went to error),
  // it broke the protocol, it was silent for BRAID_VERBS_PEER_TIMEOUT, or (same host and pid
  // namespace) its process is gone.

  // tagged_channels.h's owner hooks: flushSoon and pollSoon (ChannelEndpoint), and:
  /// Registers a channel's slots once (receive slots for the peer's remote writes); returns the
  /// registration.
  void* slotsAllocated(void* buffer, size_t bytes, bool receiving);
  static constexpr const char* kName = "verbs";

 private:
  friend VerbsBase;

  // Setup (verbs.cc).
  void openDevice();
  void createQueuePairs(PeerState& peer);
  ibv_mr* registerMemory(void* buffer, size_t bytes, const char* what, bool remote);
  Published ownAddress(PeerState& peer);
  void cleanup();

  // Connecting (connect.cc).
  void connectQueuePairs(PeerState& peer, const Published& theirs);
  /// "<jobId>/verbs/<from>/<to>/ready": rank `from`'s queue pairs to `to` can receive.
  std::string readyKey(int from, int to) const;
  // network/net.h's connection phase (connect.cc): connect brings the queue pairs up and waits
  // for the peer's ready key; accept is done once ours are up.
  std::string handleKey(const PeerState& peer) const override;
  net::Issue connect(PeerState& peer, const std::string& handle, KeyValue& kv) override;
  net::Issue accept(PeerState& peer) override;
  std::string awaiting(const PeerState& peer, bool send) const override;
  std::string connectContext() const override;

  // network/net.h's calls and the completions (progress.cc); mutex_ held.
  /// Issues message `n` of `channel` as chunked writes on one queue pair; kNotNow when that
  /// queue pair's send queue has no room now.
  net::Issue isend(VerbsSendChannel& channel, uint64_t n) override;
  /// Nothing to post: the peer writes the slot (its address and key were published).
  net::Issue irecv(VerbsRecvChannel&, uint32_t) override { return net::Issue::kDone; }
  /// The clear-to-send: `count` written into the sender's credit word for `channel`, with an
  /// immediate, on queue pair 0 (in order).
  net::Issue credit(PeerState& peer, int channel, uint64_t count) override;
  /// An abort (the reason and its length into the peer's control block) or a heartbeat (no
  /// bytes), each a write with an immediate.
  net::Issue control(PeerState& peer, net::ControlType type, const std::string& payload) override;
  bool test(int rounds) override;
  void userDrove(bool) override { test(1); }
  void onCompletion(const ibv_wc& wc);
  void onError(const ibv_wc& wc);
  void onDataWrite(PeerState& peer, uint32_t imm);
  void onControlWrite(PeerState& peer, uint32_t imm);
  void postReceive(QueuePair& qp);
  /// Writes `bytes` from the out half of `peer`'s control block at `offset` into its in half with
  /// the immediate; false when the send queue has no room now.
  bool writeControl(PeerState& peer, size_t offset, size_t bytes, uint32_t imm);
  /// Arms the completion channel, reads the queue once more, and sleeps on the channel's fd and
  /// the wake-up fd unless something came; `lock` (mutex_'s) is released for the sleep.
  void sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) override;
  size_t sendsInFlight() const override;
  /// "rank R: verbs: <what> to/from peer rank P" text helpers.
  std::string opText(const PeerState& peer, const char* op, size_t bytes, int channel) const;

  Settings settings_;
  DeviceChoice device_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* events_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int sendDepth_ = 0;  // send queue entries per queue pair
  int recvDepth_ = 0;  // receives posted per queue pair
  uint32_t psn_ = 0;   // first packet sequence number of this rank's queue pairs
  std::unordered_map<const void*, ibv_mr*> regions_;  // registrations by buffer (each once)
  std::vector<ibv_mr*> mrs_;
  std::unordered_map<uint32_t, QueuePair*> byQpn_;
};

}  // namespace braid::transport::verbs
