// The shared-memory transport: one POSIX shm "inbox" segment per rank that its shm peers write
// into. Internal to transport/ (users see transport/transport.h only).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport/backend.h"
#include "transport/doorbell.h"
#include "transport/transport.h"

namespace braid::transport::shm {

struct InboxHeader;
class ShmSendChannel;
class ShmRecvChannel;

/// This rank's shm inbox plus its mappings of every shm peer's inbox. Connection happens in three
/// steps so that the caller can interleave them with other transports:
///   ShmTransport(config, kv)  creates and publishes the inbox "/braid-<jobId>-<rank>";
///   mapPeers(kv, deadline)    maps every shm peer's inbox and announces "<jobId>/mapped/<rank>";
///   unlinkWhenMapped(...)     unlinks this inbox and the shm peers' ones as soon as every rank
///                             that maps each of them announced it (whoever gets there first).
/// The destructor unmaps everything and unlinks the inbox if that had not happened yet.
class ShmTransport final : public BackendEndpoint {
 public:
  /// Throws kSystemError when the segment cannot be created, kInvalidUsage on a bad config.
  ShmTransport(const EndpointConfig& config, KeyValue& kv);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  void mapPeers(KeyValue& kv, Deadline deadline);
  void unlinkWhenMapped(KeyValue& kv, Deadline deadline);

  // The BackendEndpoint (transport/backend.h): connectPeers = mapPeers + unlinkWhenMapped; start
  // does nothing (peers ring this rank's doorbell directly).
  Kind kind() const override { return Kind::kShm; }
  Doorbell* ownDoorbell() override { return &doorbell(); }
  void connectPeers(KeyValue& kv, Deadline deadline) override {
    mapPeers(kv, deadline);
    unlinkWhenMapped(kv, deadline);
  }
  void start(Doorbell*) override {}

  /// This rank's doorbell, in its inbox (peers ring it directly).
  Doorbell& doorbell();
  /// Valid after mapPeers() for every peer whose kind is kShm.
  SendChannel& send(int peer, int channel) override;
  RecvChannel& recv(int peer, int channel) override;
  /// False once the peer's process is gone (no such pid, or a zombie).
  bool peerAlive(int peer) override;
  /// Writes {rank, reason} into every shm peer's abort record (first writer wins) and rings them.
  void signalAbort(const std::string& reason) override;
  /// The abort record of this rank's inbox, once a peer has written it.
  std::optional<std::pair<int, std::string>> peerAbort() override;

  /// The segment name used for `rank` of job `jobId` (for tests that check /dev/shm).
  static std::string segmentName(const std::string& jobId, int rank);

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  InboxHeader* header(int peer) const;
  void initInbox(const std::vector<uint64_t>& offsets);
  static bool removeStaleSegment(const std::string& name);

  EndpointConfig config_;
  std::string name_;
  bool unlinked_ = false;
  Mapping own_;
  std::vector<Mapping> peers_;  // by rank; empty for non-shm peers
  std::vector<bool> dead_;
  std::vector<std::unique_ptr<ShmSendChannel>> sends_;  // [peer * channels + channel]
  std::vector<std::unique_ptr<ShmRecvChannel>> recvs_;
};

}  // namespace braid::transport::shm
