// The ofi transport (libfabric): one RDM endpoint per Endpoint with tagged messages into
// pre-posted receive slots, credits, aborts and heartbeats as control messages, a completion queue
// drained by the progress thread (network/), which sleeps on the queue's wait fd. Internal to
// transport/ (users see transport/transport.h).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/network/channel_endpoint.h"
#include "transport/network/tagged_channels.h"
#include "transport/ofi/provider.h"
#include "transport/transport.h"

struct fi_cq_tagged_entry;
struct fi_cq_err_entry;

namespace braid::transport::ofi {

class OfiTransport;
struct PeerState;
struct OpContext;
struct ControlPool;
struct SendSlot;
struct RecvSlot;
using OfiSendChannel = TaggedSendChannel<OfiTransport, PeerState, SendSlot>;
using OfiRecvChannel = TaggedRecvChannel<OfiTransport, PeerState, RecvSlot>;
using OfiBase = ChannelEndpoint<OfiTransport, PeerState, SendSlot, RecvSlot>;

/// Connection happens in steps (backend.h):
///   OfiTransport(config, kv)   opens the provider's fabric, domain, completion queue, address
///                              vector and endpoint, registers and pre-posts every receive slot
///                              and the control receives, and publishes "<jobId>/ofi/<rank>";
///   connectPeers(kv, deadline) (ChannelEndpoint's, over connect.cc's connect and accept):
///                              every ofi peer's address inserted and a hello (job id, secret,
///                              pid, host) each way, driving the queue on this thread;
///   start(doorbell)            hands the queue to the progress thread.
/// Every libfabric call is made under mutex_ (FI_THREAD_DOMAIN): by the progress thread, or by a
/// user thread that posts or releases (no thread switch per message; ChannelEndpoint: the pump,
/// flushSoon, pollSoon, the progress thread's hooks, a local peer's death, the teardown's wait,
/// credits, aborts and heartbeats; this class implements network/net.h's calls). The
/// destructor issues what was posted, waits for the sends to complete (bounded) and closes
/// everything.
class OfiTransport final : public OfiBase {
 public:
  OfiTransport(const EndpointConfig& config, KeyValue& kv);
  ~OfiTransport() override;
  Kind kind() const override { return Kind::kOfi; }

  // connectPeers, send, recv (ChannelEndpoint): the channels to a peer of this kind.
  // peerAlive (ChannelEndpoint): false once a send to it failed, it broke the protocol, it was
  // silent for the peer timeout (BRAID_OFI_PEER_TIMEOUT, 30 s) or (same host and pid namespace)
  // its process is gone; in that last case only after what it sent before it went has arrived.

  // tagged_channels.h's owner hooks: flushSoon (issues the send / re-posts the receive and
  // returns the credit from the calling thread) and pollSoon (ChannelEndpoint), and:
  /// A channel's slot memory exists (tagged_channels.h): registered when the provider needs
  /// local registration (or BRAID_OFI_MR=local), and receive slots for remote writes on the RMA
  /// path; returns the descriptor. Any thread.
  void* slotsAllocated(void* buffer, size_t bytes, bool receiving);
  static constexpr const char* kName = "ofi";

 private:
  friend OfiBase;

  // Setup (ofi.cc).
  void openFabric();
  /// Registers [buffer, buffer + bytes) when the provider needs local registration, or `remote`
  /// (peers write into it: FI_REMOTE_WRITE); returns the descriptor (nullptr when unregistered).
  /// Keys: the provider's (FI_MR_PROV_KEY), else unique ones chosen here. Fabric mutex held (or
  /// before start()).
  void* registerMemory(void* buffer, size_t bytes, const char* what, bool remote);
  /// Decides the data path: remote writes (fi_writedata, the slot in the immediate) where the
  /// provider offers FI_RMA, delivers remote CQ data without posted receives and has room for the
  /// immediate, unless BRAID_OFI_RMA=off; else tagged messages.
  void chooseDataPath();
  void cleanup();

  // network/net.h's connection phase (connect.cc): connect inserts the address and sends the
  // hello (and regions), accept waits for the peer's.
  std::string handleKey(const PeerState& peer) const override;
  net::Issue connect(PeerState& peer, const std::string& handle, KeyValue& kv) override;
  net::Issue accept(PeerState& peer) override;
  std::string awaiting(const PeerState& peer, bool send) const override;
  std::string connectContext() const override;

  // network/net.h's calls and the completions (progress.cc); mutex_ held.
  net::Issue isend(OfiSendChannel& channel, uint64_t n) override;
  net::Issue irecv(OfiRecvChannel& channel, uint32_t slot) override;
  net::Issue credit(PeerState& peer, int channel, uint64_t count) override;
  net::Issue control(PeerState& peer, net::ControlType type, const std::string& payload) override;
  /// Reads the completion queue until empty (at most `rounds` batches); true if anything came.
  bool test(int rounds) override;
  /// Waits up to `timeoutMillis` on the queue's wait fd (or in short steps without one) and on
  /// wake_; `lock` is mutex_'s, released while sleeping.
  void sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) override;
  /// Sends posted and not yet completed (issued or not; to live peers), control ones too.
  size_t sendsInFlight() const override;
  void userDrove(bool) override { test(1); }
  /// Sends the queued control messages while the pool has buffers, re-posts refused control
  /// receives; true if one went.
  bool flushNet() override;
  /// Control messages queued while a buffer is free, or control receives refused.
  bool netPending() const override;

  void onCompletion(OpContext& op, size_t length);
  void onError(const fi_cq_err_entry& error);
  void onControl(const char* data, size_t length);
  /// A peer's remote write filled one of our receive slots (the RMA path's immediate `data`).
  void onRemoteWrite(uint64_t data);
  /// Tells `peer` where its writes go: a kRegion per channel (the RMA path).
  void sendRegions(PeerState& peer);
  bool postControlRecv(uint32_t index);
  void sendControl(PeerState& peer, uint32_t type, uint32_t channel, uint64_t value,
                   const std::string& payload);

  ProviderChoice provider_;
  InfoPtr info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  int cqFd_ = -1;               // the queue's wait fd (FI_WAIT_FD), -1: none (sleep in steps)
  bool mrLocal_ = false;        // descriptors needed: register every buffer handed to a call
  bool useRma_ = false;         // data as remote writes (fi_writedata), else tagged messages
  std::string dataPathWhy_;     // why this data path (for the INFO line)
  std::unordered_map<const void*, fid_mr*> regions_;  // registrations by buffer
  uint64_t nextKey_ = 1;        // keys braid chooses when the provider does not (no PROV_KEY)
  std::vector<fid_mr*> mrs_;    // every registration, closed in cleanup()
  std::unique_ptr<ControlPool> control_;
};

}  // namespace braid::transport::ofi
