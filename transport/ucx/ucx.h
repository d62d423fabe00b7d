// The ucx transport (UCP API): one ucp_context + ucp_worker per endpoint, a ucp_ep per peer,
// tagged messages into pre-posted receive slots, credits and aborts as active messages, and a
// progress thread that owns the worker. Internal to transport/ (users see transport/transport.h).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "transport/network/channel_endpoint.h"
#include "transport/network/tagged_channels.h"
#include "transport/transport.h"

namespace braid::transport::ucx {

class UcxTransport;
struct PeerState;
struct ControlMessage;
struct SendSlot;
struct RecvSlot;
using UcxSendChannel = TaggedSendChannel<UcxTransport, PeerState, SendSlot>;
using UcxRecvChannel = TaggedRecvChannel<UcxTransport, PeerState, RecvSlot>;
using UcxBase = ChannelEndpoint<UcxTransport, PeerState, SendSlot, RecvSlot>;

/// Connection happens in steps so the caller can interleave them with other transports:
///   UcxTransport(config, kv)  creates the context and worker, pre-posts every receive slot and
///                             publishes "<jobId>/ucx/<rank>" = the worker address in hex;
///   connectPeers(kv, deadline) (ChannelEndpoint's, over connect.cc's connect and accept):
///                             an endpoint per ucx peer and a hello (job id, secret, pid) each
///                             way, progressing the worker on the calling thread;
///   start(doorbell)           hands the worker to the progress thread, which rings `doorbell` on
///                             arrivals, credits, aborts and peer failures.
/// The destructor issues what was posted, closes the endpoints with a flush (bounded), cancels the
/// receives and destroys the worker. The worker is used by one thread at a time (UCX's serialized
/// mode): the constructing thread until start(); then whoever holds mutex_: the progress thread,
/// or a user thread that posts or releases (the pump, ChannelEndpoint) or polls with try_lock
/// without a thread switch; then the destructor after the join. "Worker owner" below means that
/// thread. This class implements network/net.h's calls; ChannelEndpoint owns the channels, the
/// pump, credits, aborts and the progress thread's hooks.
class UcxTransport final : public UcxBase {
 public:
  UcxTransport(const EndpointConfig& config, KeyValue& kv);
  ~UcxTransport() override;
  Kind kind() const override { return Kind::kUcx; }

  // connectPeers, send, recv (ChannelEndpoint): the channels to a peer of this kind.
  // peerAlive (ChannelEndpoint): false once UCX reported the peer's endpoint failed, the peer
  // broke the protocol, or (same host and pid namespace, error mode none) its process is gone; in
  // that last case only after what it sent before it went has arrived.
  // signalAbort: the progress thread sends an abort message to every live ucx peer.
  // flushSoon (ChannelEndpoint): after a post or release, the pump on the calling thread
  // (waiting for the worker's mutex, which the progress thread holds only briefly).

  /// tryPeek/tryAcquire found nothing: progresses the worker once if it is free (hides
  /// ChannelEndpoint's: only while the progress thread sleeps, costly calls every 32nd time).
  void pollSoon();
  /// The channels' slot memory exists (tagged_channels.h): UCX needs no registration.
  void* slotsAllocated(void*, size_t, bool) { return nullptr; }
  static constexpr const char* kName = "ucx";
  /// The endpoint's sleep() calls this: a user thread that drove the worker since the
  /// progress thread last armed it wakes that thread, so no UCX work is left unannounced.
  void beforeUserSleep() override;

  // Called from UCX callbacks on the thread that owns the worker.
  void onSendDone(SendSlot& slot, ucs_status_t status);
  void onRecvDone(RecvSlot& slot, ucs_status_t status, size_t length);
  void onControlDone(ControlMessage* message, ucs_status_t status);
  void onEndpointError(PeerState& peer, ucs_status_t status);
  void onControl(const void* header, size_t headerBytes, const void* data, size_t bytes,
                 const ucp_am_recv_param_t* param);

 private:
  friend UcxBase;

  // network/net.h's connection phase (connect.cc): connect makes the endpoint and sends the
  // hello, accept waits for the peer's hello.
  std::string handleKey(const PeerState& peer) const override;
  net::Issue connect(PeerState& peer, const std::string& handle, KeyValue& kv) override;
  net::Issue accept(PeerState& peer) override;
  std::string awaiting(const PeerState& peer, bool send) const override;
  std::string connectContext() const override;
  void connected() override;

  // network/net.h's calls (progress.cc); worker owner.
  /// One tagged send (ucp_tag_send_nbx) into the receive the peer posted for that slot.
  net::Issue isend(UcxSendChannel& channel, uint64_t n) override;
  /// Re-posts the slot's tagged receive (ucp_tag_recv_nbx).
  net::Issue irecv(UcxRecvChannel& channel, uint32_t slot) override;
  /// A kCredit active message.
  net::Issue credit(PeerState& peer, int channel, uint64_t count) override;
  net::Issue control(PeerState& peer, net::ControlType type, const std::string& payload) override;
  /// ucp_worker_progress, 16 calls a round while they find work.
  bool test(int rounds) override;
  /// Arms the worker (unless a user drove it since: then returns to progress again), unlocks
  /// and polls its event fd and wake_.
  void sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) override;
  /// Send slots whose send has not completed (worker owner).
  size_t sendsInFlight() const override;
  void userDrove(bool did) override {
    if (did) userTouched_.store(true, std::memory_order_relaxed);
  }

  void cleanup();
  /// Polls the worker's event fd (armed with `armed`'s status) and wake_ for up to
  /// `timeoutMillis`; at once when the arm said events are pending.
  void pollWorker(ucs_status_t armed, int timeoutMillis);
  void sendControl(PeerState& peer, uint32_t type, uint32_t channel, uint64_t value,
                   std::string payload);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int workerFd_ = -1;                              // ucp_worker_get_efd; owned by UCX
  std::string tls_;                                // UCX_TLS as seen at start, for messages
  std::unordered_set<ControlMessage*> control_;  // in flight; worker owner only
  std::atomic<bool> userTouched_{false};  // a user thread drove the worker (see beforeUserSleep)
  int pollSkip_ = 0;                      // pollSoon(): calls to skip (user thread only)
};

}  // namespace braid::transport::ucx
