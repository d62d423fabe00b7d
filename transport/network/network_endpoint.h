// The base of the endpoints whose peers are reached through a progress thread (tcp, ucx). It owns
// what they share: the thread (start, stop, join), its eventfd wake-up (progress_wake.h), the
// loop skeleton (spin while busy, then sleep with a deadline until an event or a wake-up, call the
// backend's hooks), the peers' liveness (markDead: once, logged, doorbell rung), the abort state
// (abort_record.h: signalAbort, peerAbort, the abort the thread still has to send) and the
// drain-on-destroy policy (drain_budget.h). A backend keeps only what differs: its sockets and
// framing (tcp), its UCP worker, tags and active messages (ucx).
//
// Threads. The user thread constructs, connects, calls start(), uses the channels, destroys; the
// progress thread runs from start() until stopProgressThread() joins it. A derived destructor
// must call stopProgressThread() first, while the members the hooks use still exist.
// signalAbort() and wakeProgress() are safe from any thread. stopping() turns true once, before
// the join: the loop then asks finishStopping() every round until it agrees, so what the user
// posted before the destroy is still delivered (bounded by a DrainBudget).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transport/backend.h"
#include "transport/doorbell.h"
#include "transport/network/abort_record.h"
#include "transport/network/progress_wake.h"
#include "transport/transport.h"

namespace braid::transport {

/// What every network peer has: its rank and whether it is alive. A backend's per-peer state
/// derives from it. `alive` turns false once (markDead), read by any thread.
struct NetworkPeer {
  int rank = -1;
  std::atomic<bool> alive{true};
  std::atomic<bool> dying{false};  ///< markDead's once: set first, `alive` cleared last
  std::string reason;  ///< why it died: written by markDead before `alive` turns false
};

/// How the progress loop spins before it sleeps: at least `polls` empty rounds and `time` since
/// the last activity (or the last sleep).
struct SpinPolicy {
  int polls = 0;
  std::chrono::microseconds time{0};
};

class NetworkEndpoint : public BackendEndpoint {
 public:
  ~NetworkEndpoint() override;
  NetworkEndpoint(const NetworkEndpoint&) = delete;
  NetworkEndpoint& operator=(const NetworkEndpoint&) = delete;

  /// Calls startNetwork() (the backend's last setup), then starts the progress thread, which
  /// rings `doorbell` from then on.
  void start(Doorbell* doorbell) final;
  /// False once the peer was marked dead (ucx adds a pid check).
  bool peerAlive(int peer) override;
  /// Records the abort and wakes the progress thread, which sends it to every live peer.
  void signalAbort(const std::string& reason) final;
  /// The first abort a peer sent (or a protocol error a peer committed).
  std::optional<std::pair<int, std::string>> peerAbort() final;

  /// Wakes the progress thread if it announced a sleep (after the user made work visible).
  void wakeProgress() { wake_.wake(); }

 protected:
  /// `kindName` names the backend in logs and errors ("tcp", "ucx"); opens the wake-up eventfd.
  NetworkEndpoint(const EndpointConfig& config, const char* kindName, SpinPolicy spin,
                  int stopSleepMillis);

  /// Peers by rank, null for other kinds; the backend fills it in its constructor.
  void trackPeer(NetworkPeer* peer) { tracked_[peer->rank] = peer; }

  /// Marks `peer` dead once (a second call does nothing): logs it (a protocol error becomes the
  /// peer's abort; quiet while stopping), calls peerDied(), rings the doorbell. Any thread.
  void markDead(NetworkPeer& peer, const std::string& why, bool protocolError);
  /// A peer's abort arrived.
  void recordAbort(int peer, const std::string& reason) { aborts_.recordPeer(peer, reason); }
  /// This rank's abort, once, for the progress thread to send (cut to `maxBytes`); nullopt when
  /// there is none or it was taken already. Progress thread (or whoever owns the I/O).
  std::optional<std::string> takeOwnAbort(size_t maxBytes);
  /// Whether an own abort waits to be taken (progress thread; relaxed: a hint).
  bool ownAbortPending(std::memory_order order = std::memory_order_relaxed) const {
    return aborts_.ownRequested(order) && !abortTaken_;
  }
  /// The limit of a DrainBudget: the endpoint's timeout from now, or now after any abort.
  Deadline drainLimit() const;

  void ringDoorbell();
  void ringDoorbellIfSleeping();

  /// Stops and joins the progress thread (idempotent); see the thread notes on top.
  void stopProgressThread();
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // The backend's hooks, called on the progress thread (the loop is progress_loop.cc).
  /// Last setup before the thread starts (tcp: the epoll set); on the user thread.
  virtual void startNetwork() {}
  /// markDead() marked `peer` dead, before the doorbell rings (tcp: stop polling its socket);
  /// on the thread that marked it.
  virtual void peerDied(NetworkPeer& /*peer*/, bool /*protocolError*/) {}
  /// Waits up to `timeoutMillis` (0: not at all) for the network's events or the wake-up fd.
  virtual void waitForEvents(int timeoutMillis) = 0;
  /// One round of work without blocking; returns whether anything happened.
  virtual bool progress() = 0;
  /// Work no fd announces (posted slots, released credits, an abort): checked after the sleep
  /// was announced, before sleeping.
  virtual bool hasLocalWork() = 0;
  /// Once stopping(), at the top of every round: true when the thread may exit. `lastRoundDid`:
  /// the last round did something.
  virtual bool finishStopping(bool lastRoundDid) = 0;
  /// True while a user thread waits for the progress thread's resources (ucx: the worker): the
  /// loop yields instead of taking them again.
  virtual bool standBack() { return false; }

  EndpointConfig config_;
  const char* kindName_;
  ProgressWake wake_;  // user threads wake the progress thread through it
  Doorbell* doorbell_ = nullptr;
  AbortRecord aborts_;  // this rank's abort (sent by the progress thread), the first peer's

 private:
  void progressLoop();

  SpinPolicy spin_;
  int stopSleepMillis_;  // the loop's sleep while stopping
  std::vector<NetworkPeer*> tracked_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool abortTaken_ = false;  // progress thread
};

}  // namespace braid::transport
