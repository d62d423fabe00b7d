// The network layer's interface: the calls a network backend (tcp, ucx, ofi, verbs) implements and
// the one channel endpoint (channel_endpoint.h) drives. Shaped like NCCL's net plugin
// (ncclNet_v8: listen / connect / accept, regMr, isend / irecv returning a request or "not now",
// test, close), with what braid needs beyond it: a sleep on the network's wait fd for the
// progress thread, a persistent receive per slot (posted once and re-armed, or written by the
// peer: no clear-to-send per message), and the clear-to-send as one call a backend implements by
// message (ucx, ofi) or by remote write (verbs).
//
// Where each plugin call is:
//   listen            the backend's constructor: publishes its handle in the job's KeyValue
//                     (handleKey() names where a peer's is);
//   connect, accept   below, per peer and direction, never blocking: ChannelEndpoint's
//                     connectPeers (written once) reads every peer's handle (NCCL's bootstrap
//                     exchange), then calls both for every peer until each says kDone, waiting
//                     in connectWait() between rounds, until the deadline (a kTimeout naming
//                     each peer and what it still lacks);
//   regMr             the channels' Owner::slotsAllocated(buffer, bytes, receiving)
//                     (tagged_channels.h): once per channel side, a descriptor back;
//   isend, irecv      below; a request is a slot (its busy flag, or a counter), not an object;
//   test              below: reads the completions, which move the channels' counters;
//   close             the backend's destructor (a DrainBudget: what was posted is delivered).
// Every call below is made with the endpoint's mutex held (the progress thread, or a user
// thread that posts or releases). A failure is the backend's to report: it marks the peer dead
// with a text naming rank, peer, operation and bytes, and answers kDone (nothing to retry).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "braid/deadline.hpp"
#include "transport/network/message_wire.h"
#include "transport/network/network_endpoint.h"
#include "transport/transport.h"

namespace braid::transport::net {

/// What an isend, irecv, credit or control call did.
enum class Issue : uint8_t {
  kDone,    ///< issued (or failed, and the peer is marked dead): nothing to retry
  kNotNow,  ///< refused for now (ofi -FI_EAGAIN, a verbs send queue without room): retried
};

/// What the channel endpoint keeps per peer besides NetworkPeer; a backend's PeerState derives
/// from it. All but `alive` belong to the mutex's holder (hello and checkPid are set before
/// connectPeers() returns and only read afterwards).
struct ChannelPeer : NetworkPeer {
  PeerHello hello;                ///< what its hello (or published address) said
  bool checkPid = false;          ///< same host and pid namespace: peerAlive asks the kernel
  Clock::time_point lastHeard{};  ///< anything from it arrived (the silence check)
  Clock::time_point lastSent{};   ///< anything to it was issued (heartbeats)
};

/// Heartbeats and the silence check, for backends whose remote peers die unreported (ofi,
/// verbs): a heartbeat to a peer nothing went to for 1 s, and a peer silent for `seconds` is
/// dead ("no <heard> from it for N s (<setting>)"). seconds 0: none (ucx: UCX reports).
struct Liveness {
  double seconds = 0;
  const char* heard = "";
  const char* setting = "";
};

/// The calls, by (peer, channel, slot): `SendCh` and `RecvCh` are tagged_channels.h's channels.
template <class Peer, class SendCh, class RecvCh>
class Net {
 protected:
  ~Net() = default;

  // The connection phase (mutex held, before the progress thread starts).
  /// Where `peer` published the handle this rank connects with ("" where this rank needs none:
  /// tcp's higher rank of a pair, which is dialled).
  virtual std::string handleKey(const Peer& peer) const = 0;
  /// connect, the send direction: kDone once this rank's messages to `peer` may go; kNotNow
  /// while a step is pending (tcp: dialling, the handshake's acknowledgement; verbs: the peer's
  /// queue pairs not yet ready to receive). `handle` is what handleKey() held; `kv` for what a
  /// backend publishes or probes on the way (verbs: the ready keys). Throws for a handle this
  /// rank cannot use (kInvalidUsage, kRemoteError: malformed), naming rank, peer and key.
  virtual Issue connect(Peer& peer, const std::string& handle, KeyValue& kv) = 0;
  /// accept, the receive direction: kDone once `peer`'s messages can arrive and are trusted (tcp:
  /// its connection accepted and checked; ucx, ofi: its hello taken, ofi RMA its regions too;
  /// verbs: this rank's queue pairs ready to receive).
  virtual Issue accept(Peer& peer) = 0;
  /// What `peer` still lacks in one direction, for the timeout's message ("its hello").
  virtual std::string awaiting(const Peer& peer, bool send) const = 0;
  /// Between rounds of connect and accept: drives the network (completions; tcp: the listener
  /// and the handshakes) for up to `timeoutMillis`, `lock` unlocked while it sleeps and held
  /// again on return.
  virtual void connectWait(int timeoutMillis, std::unique_lock<std::mutex>& lock) = 0;
  /// Every peer is connected both ways (tcp: the listener closed).
  virtual void connected() {}
  /// The backend's settings a connect error should name ("UCX_TLS=rc", "provider tcp").
  virtual std::string connectContext() const { return ""; }

  /// isend: message `n` of `channel` (SlotHeader + payload in its slot n % K) into the peer's
  /// receive slot n % K. The slot's `busy` flag is its request: set while in flight, cleared by
  /// the completion (ChannelEndpoint::sent).
  virtual Issue isend(SendCh& channel, uint64_t n) = 0;
  /// irecv, persistent: receive slot `slot` of `channel` is free again, ready for the message
  /// K later. A posted receive re-posted (ucx, ofi tagged), or nothing where the peer writes
  /// the slot (ofi RMA, verbs: the slot's address and key were published at connect; tcp: the
  /// reader copies each frame into its channel's next slot).
  virtual Issue irecv(RecvCh& channel, uint32_t slot) = 0;
  /// The clear-to-send: every receive of `channel` below `count` is posted again, so the peer
  /// may have messages up to count + K - 1 in flight. By message (ucx: an active message; ofi:
  /// a control message; tcp: a credit frame) or by remote write into the sender's control block
  /// (verbs).
  virtual Issue credit(Peer& peer, int channel, uint64_t count) = 0;
  /// A control message: kAbort (payload: this rank's reason), kHeartbeat (none) or kHello (the
  /// hello payload; ucx and ofi at connect). tcp sends only kAbort (its handshake is its own).
  virtual Issue control(Peer& peer, ControlType type, const std::string& payload) = 0;
  /// test, for every request at once: reads the completions (at most `rounds` batches) and
  /// hands them to the endpoint (sent, onArrived, onWritten, onCredit, takeControl); true if
  /// anything came.
  virtual bool test(int rounds) = 0;
  /// The progress thread's sleep: arms the network's wait fd (fi_trywait, ibv_req_notify_cq,
  /// ucp_worker_arm), unlocks `lock` and polls that fd and the wake-up eventfd for up to
  /// `timeoutMillis`; returns at once where the arm says events are pending.
  virtual void sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) = 0;
  /// Sends posted and not yet completed (teardown's DrainBudget counts them down).
  virtual size_t sendsInFlight() const = 0;
  /// A user thread posted or released and the pump ran on it (`did`: something went out): ofi
  /// and verbs read the queue once (no thread switch per message); ucx notes the worker was
  /// driven (the progress thread then looks again before it sleeps).
  virtual void userDrove(bool did) = 0;
  /// The backend's own queued work (ofi: control messages waiting for a buffer, receives the
  /// provider refused): issues what it can; whether some waits that no completion announces.
  virtual bool flushNet() { return false; }
  virtual bool netPending() const { return false; }
};

}  // namespace braid::transport::net
