// What the backends share whose user threads and progress thread drive one completion queue under
// one mutex (ofi: a libfabric CQ; verbs: an ibverbs CQ): a user that posts or releases does the
// network work itself and reads the queue once (no thread switch per message); a user that finds
// nothing reads it when no one else holds it; the progress thread reads it, retries what the
// network refused for now, and sleeps on the queue's fd; a local peer is dead once its pid is gone
// and the queue was read until quiet; teardown awaits the sends (a DrainBudget).
//
// CRTP: `Derived` supplies, all called with the mutex held,
//   bool drainQueue(int rounds)                 reads the queue (at most `rounds` batches);
//   bool flushChannel(Peer&, int channel)       issues posted sends, returns credits;
//   bool channelPending(Peer&, int channel) const   work on it no completion will announce;
//   bool doLocalWork()                          aborts, every channel, heartbeats;
//   void sleepOnQueue(int millis, std::unique_lock<std::mutex>&)   sleeps, unlocking;
//   size_t sendsInFlight() const                sends not yet completed (teardown);
// and `Peer` derives from NetworkPeer and has a net::PeerHello `hello`. The channels are
// tagged_channels.h's with the backend's `SendSlot` and `RecvSlot` state, by peer x channel.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "transport/network/drain_budget.h"
#include "transport/network/network_endpoint.h"
#include "transport/network/tagged_channels.h"
#include "transport/process.h"

namespace braid::transport {

template <class Derived, class Peer, class SendSlot, class RecvSlot>
class QueueEndpoint : public NetworkEndpoint {
 public:
  using SendCh = TaggedSendChannel<Derived, Peer, SendSlot>;
  using RecvCh = TaggedRecvChannel<Derived, Peer, RecvSlot>;

  SendChannel& send(int peer, int channel) override {
    return *sends_[static_cast<size_t>(peer) * config_.channels + channel];
  }
  RecvChannel& recv(int peer, int channel) override {
    return *recvs_[static_cast<size_t>(peer) * config_.channels + channel];
  }

  /// False once marked dead, or (same host and pid namespace) once its process is gone, reported
  /// after the queue was read until quiet (what it wrote before it went has arrived).
  bool peerAlive(int peer) override {
    Peer* state = peers_[peer].get();
    if (state == nullptr) return true;
    if (!state->alive.load(std::memory_order_acquire)) return false;
    if (state->hello.local && processGone(static_cast<uint64_t>(state->hello.pid), pidNamespace_)) {
      {
        std::unique_lock<std::mutex> lock = lockAsUser();
        const Deadline until = Deadline::after(0.1);
        for (int quiet = 0; quiet < 8 && !until.expired();) {
          quiet = self().drainQueue(4) ? 0 : quiet + 1;
        }
      }
      markDead(*state, fmt::format("its process (pid {}) is gone", state->hello.pid), false);
      return false;
    }
    return true;
  }

  /// After a post or release on (peer, channel), on the user's thread: its work now, then one
  /// read of the queue (completions are ours to handle anyway; waking the thread for every
  /// message would cost a thread switch each); the thread is woken only for what the network
  /// refused for now.
  void flushSoon(Peer& peer, int channel) {
    bool leftOver = false;
    {
      std::unique_lock<std::mutex> lock = lockAsUser();
      self().flushChannel(peer, channel);
      self().drainQueue(1);
      leftOver = self().channelPending(peer, channel);
    }
    if (leftOver) wakeProgress();
  }

  /// tryPeek/tryAcquire found nothing: reads the queue once if no one holds the mutex (waiting
  /// ranks move their own data without a thread switch).
  void pollSoon() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) self().drainQueue(1);
  }

 protected:
  using NetworkEndpoint::NetworkEndpoint;

  /// The mutex for a user thread: a spinning progress thread stands back meanwhile.
  std::unique_lock<std::mutex> lockAsUser() {
    userWaiting_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(mutex_);
    userWaiting_.fetch_sub(1, std::memory_order_relaxed);
    return lock;
  }

  // NetworkEndpoint's hooks.
  void waitForEvents(int timeoutMillis) override {
    if (timeoutMillis <= 0) return;
    std::unique_lock<std::mutex> lock(mutex_);
    self().sleepOnQueue(timeoutMillis, lock);
  }
  bool progress() override {
    std::lock_guard<std::mutex> lock(mutex_);
    bool did = self().drainQueue(4);
    did |= self().doLocalWork();
    return did;
  }
  bool hasLocalWork() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ownAbortPending()) return true;
    for (auto& peer : peers_) {
      for (int c = 0; peer && c < config_.channels; ++c) {
        if (self().channelPending(*peer, c)) return true;
      }
    }
    return false;
  }
  /// One round after the stop: the user stored its last posts before it destroyed us, so that
  /// round issues them; awaitSends() waits for them to complete.
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
      self().drainQueue(4);
      self().doLocalWork();
      const size_t inFlight = self().sendsInFlight();
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
  std::mutex mutex_;                 // the queue and the backend's network state
  std::atomic<int> userWaiting_{0};  // user threads waiting for mutex_
  bool finalRoundDone_ = false;      // progress thread: the round after the stop ran
  bool connected_ = false;           // connectPeers() succeeded: teardown delivers what was posted

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace braid::transport
