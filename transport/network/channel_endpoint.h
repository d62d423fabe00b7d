// The one channel endpoint of the network backends over net.h's calls (tcp, ucx, ofi, verbs): the
// pump that issues posted sends, re-posts released receives and returns credits, written once;
// the hello, credits, aborts and heartbeats taken from the wire; the user-driven progress (a user that posts
// or releases runs the pump itself; one that finds nothing reads the queue if no one holds it);
// the progress thread's hooks; a local peer dead by pid once the queue went quiet; the teardown's
// wait for sends.
//
// The pump, per (peer, channel), and why it is correct. Counters (tagged_channels.h):
//   send:    posted (user) >= issued (mutex holder) ; credited (mutex holder, from the peer)
//   receive: arrived (mutex holder) >= released (user) >= reposted >= returned (mutex holder)
// pump(): issue messages issued..posted while isend takes them; re-arm receives
// reposted..released while irecv takes them; then credit(reposted) once, and returned = reposted.
// 1. No message lands on a slot in use: the user posts message p only while p - credited < K
//    (tryAcquire/post), and credited is a count the receiver sent only after every receive below
//    it was re-armed (returned <= reposted, and reposted moves only past an irecv that took), each
//    after the user released that slot (reposted <= released). Credits are cumulative and only
//    raise credited (takeCredit), so a late or repeated credit never lowers it; verbs writes
//    them on one queue pair, in order, tcp on the peer's one socket.
// 2. Each message is issued once and in order: issued moves under the mutex, past an isend that
//    took it; a refused one (kNotNow) is retried from the same count.
// 3. No work is lost or left asleep: every post and release runs the pump under the mutex on the
//    user's thread (flushSoon); what the network refused stays counted (issued < posted, reposted
//    < released, returned < reposted) and channelPending() says so: the user then wakes the
//    progress thread, whose loop asks hasLocalWork() after announcing its sleep (progress_wake.h:
//    either the check sees the counts or the wake-up makes its fd readable) and otherwise sleeps
//    on the network's fd, which a completion (room again) makes readable; every sleep also ends
//    within 100 ms.
// 4. A dead peer gets nothing more (no send, credit, abort or heartbeat); its released receives
//    still count as re-armed, so no work stays pending for it.
// 5. Arrivals: a completed receive or a remote write's immediate names a slot; arrive() counts
//    them in order (out-of-order completions wait in the slot's `done`), checking size and
//    sequence: a violation is the peer's protocol error (markDead: its abort).
//
// CRTP only for the channels' owner (`Derived` is tagged_channels.h's Owner: flushSoon, pollSoon,
// slotsAllocated, kName); the network calls are net.h's virtuals. `Peer` derives from
// net::ChannelPeer.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "transport/network/drain_budget.h"
#include "transport/network/net.h"
#include "transport/network/network_endpoint.h"
#include "transport/network/tagged_channels.h"
#include "transport/peer_key.h"
#include "transport/process.h"

namespace braid::transport {

template <class Derived, class Peer, class SendSlot, class RecvSlot>
class ChannelEndpoint
    : public NetworkEndpoint,
      protected net::Net<Peer, TaggedSendChannel<Derived, Peer, SendSlot>,
                         TaggedRecvChannel<Derived, Peer, RecvSlot>> {
 public:
  using SendCh = TaggedSendChannel<Derived, Peer, SendSlot>;
  using RecvCh = TaggedRecvChannel<Derived, Peer, RecvSlot>;

  SendChannel& send(int peer, int channel) override { return *sends_[index(peer, channel)]; }
  RecvChannel& recv(int peer, int channel) override { return *recvs_[index(peer, channel)]; }

  /// False once marked dead, or (checkPid: same host and pid namespace) once its process is
  /// gone, reported after the queue was read until quiet (what it sent before it went arrived).
  bool peerAlive(int peer) override {
    Peer* state = peers_[peer].get();
    if (state == nullptr) return true;
    if (!state->alive.load(std::memory_order_acquire)) return false;
    if (state->checkPid && processGone(static_cast<uint64_t>(state->hello.pid), pidNamespace_)) {
      {
        std::unique_lock<std::mutex> lock = lockAsUser();
        const Deadline until = Deadline::after(0.1);
        bool did = false;
        for (int quiet = 0; quiet < 8 && !until.expired();) {
          const bool came = this->test(4);
          did |= came;
          quiet = came ? 0 : quiet + 1;
        }
        this->userDrove(did);
      }
      markDead(*state, fmt::format("its process (pid {}) is gone", state->hello.pid), false);
      return false;
    }
    return true;
  }

  /// BackendEndpoint::connectPeers for every network backend, NCCL's sequence: each peer's
  /// listen handle from `kv` (blocking, by `deadline`), then net.h's connect (send direction) and
  /// accept (receive direction) for every peer, again after each connectWait(), until both
  /// answered kDone for all. A peer marked dead meanwhile fails the connect with its reason; the
  /// deadline with kTimeout naming each missing peer and what it lacks.
  void connectPeers(KeyValue& kv, Deadline deadline) final {
    const int rank = config_.rank;
    std::vector<std::string> handles(peers_.size());
    for (auto& peer : peers_) {
      if (!peer) continue;
      const std::string key = this->handleKey(*peer);
      if (!key.empty()) {
        handles[peer->rank] =
            getPeerKey(kv, key, deadline, rank, peer->rank, kindName_, "publish its address");
      }
    }
    const std::string context = this->connectContext();
    const std::string settings = context.empty() ? "" : fmt::format(" ({})", context);
    constexpr uint8_t kSend = 1, kReceive = 2;
    std::vector<uint8_t> up(peers_.size(), 0);
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      std::string missing;
      for (auto& peer : peers_) {
        if (!peer) continue;
        uint8_t& u = up[peer->rank];
        if (!(u & kSend) && this->connect(*peer, handles[peer->rank], kv) == net::Issue::kDone) {
          u |= kSend;
        }
        if (!(u & kReceive) && this->accept(*peer) == net::Issue::kDone) u |= kReceive;
        if (!peer->alive.load()) {
          fail(ErrorCode::kRemoteError, "rank {}: {} connection to peer rank {} failed: {}{}", rank,
               kindName_, peer->rank, peer->reason, settings);
        }
        if (u == (kSend | kReceive)) continue;
        std::string lacks = !(u & kSend) ? this->awaiting(*peer, true) : "";
        if (!(u & kReceive)) {
          const std::string receive = this->awaiting(*peer, false);
          if (receive != lacks) lacks += (lacks.empty() ? "" : ", ") + receive;
        }
        missing += fmt::format("{}{} ({})", missing.empty() ? "" : ", ", peer->rank, lacks);
      }
      if (missing.empty()) break;
      if (deadline.expired()) {
        fail(ErrorCode::kTimeout, "rank {}: {} connect timed out waiting for peer rank(s) {}{}",
             rank, kindName_, missing, settings);
      }
      this->connectWait(std::min(deadline.millisLeft(), 10), lock);
    }
    const Clock::time_point now = Clock::now();
    for (auto& peer : peers_) {
      if (!peer) continue;
      peer->lastHeard = peer->lastSent = now;
      peer->checkPid = peer->hello.local;
    }
    this->connected();
    connected_ = true;
  }

  /// After a post or release on (peer, channel), on the user's thread: the pump now (no thread
  /// switch per message), then userDrove(); the thread is woken only for what was refused.
  void flushSoon(Peer& peer, int channel) {
    bool leftOver = false;
    {
      std::unique_lock<std::mutex> lock = lockAsUser();
      this->userDrove(pump(peer, channel));
      leftOver = channelPending(peer, channel);
    }
    if (leftOver) wakeProgress();
  }

  /// tryPeek/tryAcquire found nothing: reads the queue once if no one holds the mutex (waiting
  /// ranks move their own data without a thread switch). ucx hides it with its own policy.
  void pollSoon() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) this->test(1);
  }

 protected:
  ChannelEndpoint(const EndpointConfig& config, const char* kindName, SpinPolicy spin,
                  int stopSleepMillis)
      : NetworkEndpoint(config, kindName, spin, stopSleepMillis),
        peers_(static_cast<size_t>(config.size)) {}

  size_t index(int peer, int channel) const {
    return static_cast<size_t>(peer) * config_.channels + channel;
  }

  /// Creates both channels to every peer in peers_ (the backend's constructor, once the network
  /// can register memory: a receive channel's slots are allocated and registered at once).
  void addChannels() {
    sends_.resize(static_cast<size_t>(config_.size) * config_.channels);
    recvs_.resize(sends_.size());
    for (int p = 0; p < config_.size; ++p) {
      if (!peers_[p]) continue;
      for (int c = 0; c < config_.channels; ++c) {
        auto* owner = static_cast<Derived*>(this);
        sends_[index(p, c)] = std::make_unique<SendCh>(owner, peers_[p].get(), config_, c);
        recvs_[index(p, c)] = std::make_unique<RecvCh>(owner, peers_[p].get(), config_, c);
      }
    }
  }

  /// The mutex for a user thread: a spinning progress thread stands back meanwhile.
  std::unique_lock<std::mutex> lockAsUser() {
    userWaiting_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(mutex_);
    userWaiting_.fetch_sub(1, std::memory_order_relaxed);
    return lock;
  }

  // What test() hands over, mutex held.
  /// The send from `slot` completed (or failed: the backend marked the peer).
  void sent(SendSlot& slot) {
    slot.busy.store(0, std::memory_order_release);
    ringDoorbellIfSleeping();
  }
  /// A receive into slot `index` of `channel` completed with `length` bytes.
  void onArrived(RecvCh& channel, uint32_t index, size_t length) {
    Peer& peer = *channel.peerState_;
    peer.lastHeard = Clock::now();
    if (std::string why = channel.arrive(index, length); !why.empty()) {
      markDead(peer, why, true);
      return;
    }
    ringDoorbellIfSleeping();
  }
  /// A remote write from `peer` filled slot `slot` of `channel` (its immediate said so).
  void onWritten(Peer& peer, uint32_t channel, uint32_t slot) {
    peer.lastHeard = Clock::now();
    RecvCh& rc = *recvs_[index(peer.rank, static_cast<int>(channel))];
    if (std::string why = rc.arriveWritten(slot); !why.empty()) {
      markDead(peer, why, true);
      return;
    }
    ringDoorbellIfSleeping();
  }
  /// `peer` re-armed its receives of `channel` below `count`.
  void onCredit(Peer& peer, uint32_t channel, uint64_t count) {
    net::ControlHeader h;
    h.type = net::kCredit;
    h.rank = peer.rank;
    h.channel = channel;
    h.value = count;
    bool raised = false;
    if (std::string why = takeCredit(sends_, config_.channels, h, &raised); !why.empty()) {
      markDead(peer, why, true);
    } else if (raised) {
      ringDoorbellIfSleeping();
    }
  }
  void onAbort(Peer& peer, const std::string& reason) {
    recordAbort(peer.rank, reason.substr(0, net::kMaxAbortReason));
    ringDoorbell();
  }
  /// A control message from `peer` (decoded): hello, credit, abort and heartbeat are taken here;
  /// false for the backend's own types (ofi's region).
  bool takeControl(Peer& peer, const net::ControlHeader& h, const char* payload, size_t bytes) {
    peer.lastHeard = Clock::now();
    switch (h.type) {
      case net::kHello: {
        std::string why;
        if (!net::takeHello(payload, bytes, config_, hostId_, pidNamespace_, &peer.hello, &why)) {
          BRAID_WARN("rank {}: {}: ignoring a hello claiming to be from rank {}: {}", config_.rank,
                     kindName_, peer.rank, why);
        }
        return true;
      }
      case net::kCredit:
        onCredit(peer, h.channel, h.value);
        return true;
      case net::kAbort:
        onAbort(peer, std::string(payload, std::min<size_t>(bytes, net::kMaxAbortReason)));
        return true;
      case net::kHeartbeat:
        return true;
      default:
        return false;
    }
  }

  /// Sends `peer` this rank's hello (job id, secret, pid, host; ucx and ofi at connect: the peer's
  /// liveness checks and the trust in its messages hang on it; verbs publishes the same in its
  /// address instead).
  void sendHello(Peer& peer) {
    this->control(peer, net::kHello,
                  net::helloPayload(config_, peer.rank, hostId_, pidNamespace_));
  }

  /// The pump of (peer, channel): see the argument on top. True if anything moved.
  bool pump(Peer& peer, int channel) {
    bool did = false;
    const bool alive = peer.alive.load(std::memory_order_relaxed);
    SendCh& sc = *sends_[index(peer.rank, channel)];
    const uint64_t posted = sc.posted_.load(std::memory_order_acquire);
    while (alive && sc.issued_ < posted && this->isend(sc, sc.issued_) == net::Issue::kDone) {
      ++sc.issued_;
      did = true;
    }
    RecvCh& rc = *recvs_[index(peer.rank, channel)];
    const uint64_t released = rc.released_.load(std::memory_order_acquire);
    uint64_t n = rc.reposted_;
    while (n < released &&
           this->irecv(rc, static_cast<uint32_t>(n % rc.k_)) == net::Issue::kDone) {
      ++n;
    }
    if (n > rc.reposted_) {
      rc.reposted_ = n;
      did = true;
    }
    if (alive && rc.returned_ < rc.reposted_ &&
        this->credit(peer, channel, rc.reposted_) == net::Issue::kDone) {
      rc.returned_ = rc.reposted_;
      did = true;
    }
    return did;
  }
  /// Work on (peer, channel) that no completion will announce (refused or not yet issued).
  bool channelPending(Peer& peer, int channel) const {
    const bool alive = peer.alive.load(std::memory_order_relaxed);
    const SendCh& sc = *sends_[index(peer.rank, channel)];
    const RecvCh& rc = *recvs_[index(peer.rank, channel)];
    return (alive && sc.posted_.load(std::memory_order_relaxed) > sc.issued_) ||
           rc.released_.load(std::memory_order_relaxed) > rc.reposted_ ||
           (alive && rc.reposted_ > rc.returned_) || this->netPending();
  }

  /// This rank's abort to every live peer (once), the pump of every channel, the backend's own
  /// queue, heartbeats and the silence check.
  bool doLocalWork() {
    bool did = false;
    if (std::optional<std::string> reason = takeOwnAbort(net::kMaxAbortReason)) {
      for (auto& peer : peers_) {
        if (!peer || !peer->alive.load()) continue;
        if (this->control(*peer, net::kAbort, *reason) == net::Issue::kNotNow) {
          BRAID_WARN("rank {}: {}: no room to send peer rank {} this rank's abort", config_.rank,
                     kindName_, peer->rank);
        }
      }
      did = true;
    }
    for (auto& peer : peers_) {
      if (!peer) continue;
      for (int c = 0; c < config_.channels; ++c) did |= pump(*peer, c);
    }
    did |= this->flushNet();
    if (!stopping()) keepAlive();
    return did;
  }

  /// net.h's connectWait where the queue is all there is to drive (ucx, ofi, verbs): reads it,
  /// and sleeps on it when nothing came.
  void connectWait(int timeoutMillis, std::unique_lock<std::mutex>& lock) override {
    bool did = this->test(8);
    did |= this->flushNet();
    if (did) return;
    this->sleepOnQueue(timeoutMillis, lock);
    if (!lock.owns_lock()) lock.lock();
  }

  // NetworkEndpoint's hooks.
  void waitForEvents(int timeoutMillis) override {
    if (timeoutMillis <= 0) return;
    std::unique_lock<std::mutex> lock(mutex_);
    this->sleepOnQueue(timeoutMillis, lock);
  }
  bool progress() override {
    std::lock_guard<std::mutex> lock(mutex_);
    bool did = this->test(4);
    did |= doLocalWork();
    return did;
  }
  bool hasLocalWork() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ownAbortPending()) return true;
    for (auto& peer : peers_) {
      for (int c = 0; peer && c < config_.channels; ++c) {
        if (channelPending(*peer, c)) return true;
      }
    }
    return false;
  }
  /// One round after the stop: the user stored its last posts before it destroyed us, so that
  /// round issues them; the backend's teardown delivers them (awaitSends, ucx: the flush).
  bool finishStopping(bool) override { return std::exchange(finalRoundDone_, true); }
  bool standBack() override { return userWaiting_.load(std::memory_order_relaxed) != 0; }

  /// Teardown, after the progress thread stopped: once connected, what was posted is delivered
  /// while the peers take it (a DrainBudget of `stepSeconds`: a frozen peer costs one step,
  /// never a hang).
  void awaitSends(double stepSeconds) {
    if (!connected_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    DrainBudget budget(stepSeconds, drainLimit());
    size_t before = SIZE_MAX;
    while (true) {
      this->test(4);
      doLocalWork();
      const size_t inFlight = this->sendsInFlight();
      if (inFlight == 0 || budget.expired()) break;
      if (inFlight < before) budget.progressed();
      before = inFlight;
      std::this_thread::yield();
    }
  }

  std::vector<std::unique_ptr<Peer>> peers_;    // by rank; null for peers of other kinds
  std::vector<std::unique_ptr<SendCh>> sends_;  // by peer x channels + channel; null likewise
  std::vector<std::unique_ptr<RecvCh>> recvs_;
  uint64_t pidNamespace_ = 0;
  uint64_t hostId_ = 0;
  net::Liveness liveness_;           // heartbeats and the silence check (set by the backend)
  std::mutex mutex_;                 // the network and every counter the pump moves
  std::atomic<int> userWaiting_{0};  // user threads waiting for mutex_
  bool finalRoundDone_ = false;      // progress thread: the round after the stop ran
  bool connected_ = false;           // connectPeers() succeeded: teardown delivers what was posted

 private:
  static constexpr auto kHeartbeatEvery = std::chrono::seconds(1);

  /// Heartbeats to peers nothing went to for a second; a peer silent too long is dead. A failed
  /// heartbeat is how a vanished host shows (verbs: RETRY_EXC; ofi: the send's error).
  void keepAlive() {
    if (liveness_.seconds <= 0) return;
    const Clock::time_point now = Clock::now();
    const auto silence = std::chrono::duration<double>(liveness_.seconds);
    for (auto& peer : peers_) {
      if (!peer || !peer->alive.load(std::memory_order_relaxed)) continue;
      if (now - peer->lastHeard > silence) {
        markDead(*peer,
                 fmt::format("no {} from it for {} s ({})", liveness_.heard, liveness_.seconds,
                             liveness_.setting),
                 false);
      } else if (now - peer->lastSent > kHeartbeatEvery) {
        this->control(*peer, net::kHeartbeat, {});
        peer->lastSent = now;  // issued, or queued and issued as soon as there is room
      }
    }
  }
};

}  // namespace braid::transport
