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

#include "transport/network/network_endpoint.h"
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

/// Connection happens in steps so the caller can interleave them with other transports:
///   UcxTransport(config, kv)  creates the context and worker, pre-posts every receive slot and
///                             publishes "<jobId>/ucx/<rank>" = the worker address in hex;
///   connectPeers(kv, deadline) creates an endpoint per ucx peer and exchanges a hello (job id,
///                             secret, pid) with each, progressing the worker on the calling
///                             thread;
///   start(doorbell)           hands the worker to the progress thread, which rings `doorbell` on
///                             arrivals, credits, aborts and peer failures.
/// The destructor issues what was posted, closes the endpoints with a flush (bounded), cancels the
/// receives and destroys the worker. The worker is used by one thread at a time (UCX's serialized
/// mode): the constructing thread until start(); then whoever holds workerMutex_: the progress
/// thread, or a user thread that got it with try_lock to send, release or poll without a thread
/// switch; then the destructor after the join. "Worker owner" below means that thread.
class UcxTransport final : public NetworkEndpoint {
 public:
  UcxTransport(const EndpointConfig& config, KeyValue& kv);
  ~UcxTransport() override;
  Kind kind() const override { return Kind::kUcx; }

  void connectPeers(KeyValue& kv, Deadline deadline) override;
  SendChannel& send(int peer, int channel) override;
  RecvChannel& recv(int peer, int channel) override;
  /// False once UCX reported the peer's endpoint failed, the peer broke the protocol, or (same
  /// host and pid namespace) its process is gone; in that last case only after what it sent
  /// before it went has arrived.
  bool peerAlive(int peer) override;
  // signalAbort: the progress thread sends an abort message to every live ucx peer.

  /// After a post or release on (peer, channel): issues the send / re-posts the receive and
  /// returns the credit from the calling thread (waiting for the worker's mutex, which the
  /// progress thread holds only briefly).
  void flushSoon(PeerState& peer, int channel);
  /// tryPeek/tryAcquire found nothing: progresses the worker once if it is free.
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
  // NetworkEndpoint's hooks (progress.cc).
  void waitForEvents(int timeoutMillis) override;
  bool progress() override;
  bool hasLocalWork() override;
  bool finishStopping(bool lastRoundDid) override;
  bool standBack() override;

  void cleanup();
  /// Send slots whose send has not completed (worker owner).
  size_t sendsInFlight() const;
  /// Progresses the worker until it is quiet (bounded), from a user thread: called before a gone
  /// peer is reported, so that what it sent before it went has arrived.
  void drainWorker();
  void postRecv(UcxRecvChannel& channel, uint32_t index);
  void issueSend(UcxSendChannel& channel, uint64_t n);
  void sendControl(PeerState& peer, uint32_t type, uint32_t channel, uint64_t value,
                   std::string payload);
  void onHello(int from, const char* data, size_t bytes);
  bool doLocalWork();
  bool flushChannel(PeerState& peer, int channel);
  /// Arms the worker (holding *workerLock if given) and polls its event fd and wake_.
  void sleepOnWorker(int timeoutMillis, std::mutex* workerLock);
  /// Records why (the first reason) and marks the peer dead (NetworkEndpoint::markDead).
  void markDead(PeerState& peer, const std::string& why, bool protocolError);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int workerFd_ = -1;                              // ucp_worker_get_efd; owned by UCX
  std::string tls_;                                // UCX_TLS as seen at start, for messages
  std::vector<std::unique_ptr<PeerState>> peers_;  // by rank; null for non-ucx peers
  std::vector<std::unique_ptr<UcxSendChannel>> sends_;
  std::vector<std::unique_ptr<UcxRecvChannel>> recvs_;
  std::unordered_set<ControlMessage*> control_;  // in flight; worker owner only
  uint64_t pidNamespace_ = 0;
  uint64_t hostId_ = 0;
  std::mutex workerMutex_;                // held by the worker's owner after start()
  std::atomic<bool> userTouched_{false};  // a user thread drove the worker (see beforeUserSleep)
  std::atomic<int> userWaiting_{0};       // user threads waiting for workerMutex_
  int pollSkip_ = 0;                      // pollSoon(): calls to skip (user thread only)
  bool finalRoundDone_ = false;           // progress thread: the round after the stop ran
};

}  // namespace braid::transport::ucx
