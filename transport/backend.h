// What a transport backend is (cuda_ipc, shm, ucx, tcp): internal to transport/ (users see
// transport.h).
//
// A Backend is one mechanism that can carry a peer's channels. It says whether this build has
// it, whether it can reach a peer from here, and opens its share of an Endpoint: a
// BackendEndpoint that owns the channels to the peers whose kind is the backend's. connect()
// (transport.cc) opens one BackendEndpoint per kind the config uses, in the registry's order, and
// puts them behind one Endpoint and one doorbell.
//
// Connection is in steps, so that no rank waits on a step another rank can only take after its
// own wait:
//   Backend::open(config, kv)     publishes what peers need (inbox name, address) and returns
//                                 at once; every backend opens before any connects;
//   connectPeers(kv, deadline)    waits for and connects to this kind's peers (throws kTimeout
//                                 naming the missing peer);
//   start(doorbell)               from here on, arrivals, credits, aborts and peer failures ring
//                                 `doorbell` (the one of the whole Endpoint).
// The destructor releases everything, bounded in time (a frozen peer costs about a second, never
// a hang). BackendEndpoints are destroyed in the reverse order of opening, so the one that owns
// the doorbell (ownDoorbell) outlives the threads that ring it.
//
// Thread-safety as Endpoint: one thread at a time, except signalAbort().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport/doorbell.h"
#include "transport/transport.h"

namespace braid::transport {

/// One backend's share of an Endpoint: the channels to the peers of its kind.
class BackendEndpoint {
 public:
  virtual ~BackendEndpoint() = default;
  virtual Kind kind() const = 0;
  /// A doorbell this backend's peers ring directly (shm: in this rank's inbox), which then must
  /// be the Endpoint's; nullptr when it has none.
  virtual Doorbell* ownDoorbell() { return nullptr; }
  /// Connects to every peer of this kind by `deadline`; see the steps above.
  virtual void connectPeers(KeyValue& kv, Deadline deadline) = 0;
  /// Rings `doorbell` on every arrival, credit, abort and peer failure from now on.
  virtual void start(Doorbell* doorbell) = 0;
  /// Valid after connectPeers() for every peer of this kind.
  virtual SendChannel& send(int peer, int channel) = 0;
  virtual RecvChannel& recv(int peer, int channel) = 0;
  /// As Endpoint::peerAlive, for a peer of this kind.
  virtual bool peerAlive(int peer) = 0;
  /// Tells every peer of this kind this rank has failed; safe from any thread.
  virtual void signalAbort(const std::string& reason) = 0;
  /// The first abort a peer of this kind signalled: {peer rank, reason}.
  virtual std::optional<std::pair<int, std::string>> peerAbort() = 0;
  /// Called after the Endpoint's caller announced a sleep and made its last check, before it
  /// sleeps on the doorbell (ucx: a worker progressed by a user thread is looked at again).
  virtual void beforeUserSleep() {}
};

/// Where a rank runs, as far as choosing a backend goes.
struct HostInfo {
  std::string host;  ///< host key: equal for ranks that share memory (comm's host fingerprint)
};

/// One mechanism for channels.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Kind kind() const = 0;
  const char* name() const { return kindName(kind()); }
  /// True: its slots are device memory on EndpointConfig::device (cuda_ipc), for the device
  /// communicator's endpoints; false: host memory. One endpoint never mixes the two.
  virtual bool deviceMemory() const { return false; }
  /// Whether this build can connect peers of this kind; when not, *why (if given) receives a
  /// one-line reason that says what to install.
  virtual bool available(std::string* why) const = 0;
  /// Whether chooseKinds may pick it when no kind is forced (ofi: only with a hardware
  /// provider); when not, *why (if given) says why. Asked only of an available backend.
  virtual bool automatic(std::string* /*why*/) const { return true; }
  /// What describeBackends() shows beside it (ofi: the provider and how it was chosen).
  virtual std::string detail() const { return ""; }
  /// Whether a rank at `local` can reach a peer at `peer` with this backend (shm: same host).
  virtual bool canReach(const HostInfo& local, const HostInfo& peer) const = 0;
  /// Step one of connecting (see above); only called when available().
  virtual std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config,
                                                KeyValue& kv) const = 0;
};

/// A backend this build always has when its folder is compiled: open() makes a Part (its
/// BackendEndpoint constructed from (config, kv)); `sameHostOnly` for shared memory and CUDA IPC.
template <class Part>
class BuiltBackend final : public Backend {
 public:
  BuiltBackend(Kind kind, bool sameHostOnly, bool deviceMemory = false)
      : kind_(kind), sameHostOnly_(sameHostOnly), deviceMemory_(deviceMemory) {}
  Kind kind() const override { return kind_; }
  bool deviceMemory() const override { return deviceMemory_; }
  bool available(std::string*) const override { return true; }
  bool canReach(const HostInfo& local, const HostInfo& peer) const override {
    return !sameHostOnly_ || local.host == peer.host;
  }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<Part>(config, kv);
  }

 private:
  Kind kind_;
  bool sameHostOnly_;
  bool deviceMemory_;
};

/// The stand-in of a backend this build lacks (its folder's missing.cc): listed, never
/// available, and `why` says what to install.
class MissingBackend final : public Backend {
 public:
  MissingBackend(Kind kind, bool deviceMemory, std::string why)
      : kind_(kind), deviceMemory_(deviceMemory), why_(std::move(why)) {}
  Kind kind() const override { return kind_; }
  bool deviceMemory() const override { return deviceMemory_; }
  bool available(std::string* why) const override {
    if (why != nullptr) *why = why_;
    return false;
  }
  bool canReach(const HostInfo&, const HostInfo&) const override { return false; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue&) const override;

 private:
  Kind kind_;
  bool deviceMemory_;
  std::string why_;
};

/// Every backend, best first (cuda_ipc > shm > verbs > ofi > ucx > tcp; ofi only when automatic()), including those this build lacks
/// (available() says why).
const std::vector<const Backend*>& backends();
/// The backend of `kind`, or nullptr (kSelf).
const Backend* findBackend(Kind kind);

// The backends, each defined in its folder's backend.cc (its missing.cc stands in where the
// build lacks what it needs: UCX, libfabric, libibverbs, CUDA).
const Backend& cudaIpcBackend();
const Backend& shmBackend();
const Backend& tcpBackend();
const Backend& ucxBackend();
const Backend& ofiBackend();
const Backend& verbsBackend();

}  // namespace braid::transport
