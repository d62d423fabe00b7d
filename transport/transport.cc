// connect(): the composite endpoint that puts shm and tcp peers behind one Endpoint and one
// doorbell (in this rank's shm inbox when it has one, else a private word the tcp thread rings).
#include "transport/transport.h"

#include <atomic>

#include "common/log.h"
#include "transport/doorbell.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

namespace braid::transport {

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kSelf:
      return "self";
    case Kind::kShm:
      return "shm";
    case Kind::kTcp:
      return "tcp";
  }
  return "unknown";
}

bool parseKind(const std::string& name, Kind* out) {
  if (name == "shm") {
    *out = Kind::kShm;
  } else if (name == "tcp") {
    *out = Kind::kTcp;
  } else {
    return false;
  }
  return true;
}

namespace {

void validate(const EndpointConfig& c) {
  BRAID_ENFORCE(c.size >= 1 && c.rank >= 0 && c.rank < c.size, ErrorCode::kInvalidUsage,
                "transport connect: rank {} outside a world of size {}", c.rank, c.size);
  BRAID_ENFORCE(static_cast<int>(c.peerKinds.size()) == c.size, ErrorCode::kInvalidUsage,
                "rank {}: transport connect: {} peer kinds for a world of size {}", c.rank,
                c.peerKinds.size(), c.size);
  for (int p = 0; p < c.size; ++p) {
    Kind kind = c.peerKinds[p];
    if (p == c.rank) {
      BRAID_ENFORCE(kind == Kind::kSelf, ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: own peer kind is {}, not self", c.rank,
                    kindName(kind));
    } else {
      BRAID_ENFORCE(kind == Kind::kShm || kind == Kind::kTcp, ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer {} has kind {}", c.rank, p, kindName(kind));
    }
  }
  BRAID_ENFORCE(
      c.channels >= 1 && c.slots >= 1 && c.slotBytes >= 1 && c.slotBytes <= (size_t{1} << 34),
      ErrorCode::kInvalidUsage,
      "rank {}: transport connect: channels {}, slots {}, slotBytes {} out of range", c.rank,
      c.channels, c.slots, c.slotBytes);
  BRAID_ENFORCE(c.timeoutSeconds > 0, ErrorCode::kInvalidUsage,
                "rank {}: transport connect: timeout {} s is not positive", c.rank,
                c.timeoutSeconds);
  BRAID_ENFORCE(!c.jobId.empty(), ErrorCode::kInvalidUsage,
                "rank {}: transport connect: empty jobId", c.rank);
}

class CompositeEndpoint final : public Endpoint {
 public:
  explicit CompositeEndpoint(const EndpointConfig& config) : config_(config) {
    sends_.resize(static_cast<size_t>(config.size) * config.channels, nullptr);
    recvs_.resize(static_cast<size_t>(config.size) * config.channels, nullptr);
  }
  ~CompositeEndpoint() override {
    tcp_.reset();  // joins the thread that rings the doorbell inside shm_'s inbox
    shm_.reset();
  }

  void open(KeyValue& kv) {
    const EndpointConfig& c = config_;
    Deadline deadline = Deadline::after(c.timeoutSeconds);
    bool anyShm = false, anyTcp = false;
    for (int p = 0; p < c.size; ++p) {
      anyShm |= c.peerKinds[p] == Kind::kShm;
      anyTcp |= c.peerKinds[p] == Kind::kTcp;
    }
    // Publish everything first, then wait for peers: no rank waits on a step another rank can
    // only take after its own wait.
    if (anyShm) shm_ = std::make_unique<shm::ShmTransport>(c, kv);
    if (anyTcp) tcp_ = std::make_unique<tcp::TcpTransport>(c, kv);
    doorbell_ = shm_ ? &shm_->doorbell() : &privateDoorbell_;
    if (shm_) {
      shm_->mapPeers(kv, deadline);
      shm_->unlinkWhenMapped(kv, deadline);
    }
    if (tcp_) {
      tcp_->connectPeers(kv, deadline);
      tcp_->start(doorbell_);
    }
    for (int p = 0; p < c.size; ++p) {
      for (int ch = 0; ch < c.channels && p != c.rank; ++ch) {
        size_t i = static_cast<size_t>(p) * c.channels + ch;
        if (c.peerKinds[p] == Kind::kShm) {
          sends_[i] = &shm_->send(p, ch);
          recvs_[i] = &shm_->recv(p, ch);
        } else {
          sends_[i] = &tcp_->send(p, ch);
          recvs_[i] = &tcp_->recv(p, ch);
        }
      }
    }
    BRAID_INFO("rank {}: transport connected ({} ranks, {} channels x {} slots x {} bytes)", c.rank,
               c.size, c.channels, c.slots, c.slotBytes);
  }

  int rank() const override { return config_.rank; }
  int size() const override { return config_.size; }
  Kind peerKind(int peer) const override {
    checkPeer(peer, 0, true);
    return config_.peerKinds[peer];
  }
  int channels() const override { return config_.channels; }

  SendChannel& send(int peer, int channel) override {
    checkPeer(peer, channel, false);
    return *sends_[static_cast<size_t>(peer) * config_.channels + channel];
  }
  RecvChannel& recv(int peer, int channel) override {
    checkPeer(peer, channel, false);
    return *recvs_[static_cast<size_t>(peer) * config_.channels + channel];
  }

  uint32_t prepareSleep() override { return prepareDoorbellSleep(*doorbell_); }
  void sleep(uint32_t ticket, Clock::time_point until) override {
    sleepOnDoorbell(*doorbell_, ticket, until);
  }

  bool peerAlive(int peer) override {
    checkPeer(peer, 0, true);
    switch (config_.peerKinds[peer]) {
      case Kind::kShm:
        return shm_->peerAlive(peer);
      case Kind::kTcp:
        return tcp_->peerAlive(peer);
      case Kind::kSelf:
        return true;
    }
    return true;
  }

  void signalAbort(const std::string& reason) override {
    if (aborted_.exchange(true)) return;
    if (shm_) shm_->signalAbort(reason);
    if (tcp_) tcp_->signalAbort(reason);
    ringDoorbell(*doorbell_);  // a local sleeper (the communicator's thread) wakes up too
  }

  std::optional<std::pair<int, std::string>> peerAbort() override {
    if (shm_) {
      if (auto a = shm_->peerAbort()) return a;
    }
    if (tcp_) return tcp_->peerAbort();
    return std::nullopt;
  }

 private:
  void checkPeer(int peer, int channel, bool selfOk) const {
    BRAID_ENFORCE(peer >= 0 && peer < config_.size && (selfOk || peer != config_.rank) &&
                      channel >= 0 && channel < config_.channels,
                  ErrorCode::kInvalidUsage,
                  "rank {}: no channel {} to peer {} (size {}, {} channels)", config_.rank, channel,
                  peer, config_.size, config_.channels);
  }

  EndpointConfig config_;
  Doorbell privateDoorbell_;
  Doorbell* doorbell_ = &privateDoorbell_;
  std::unique_ptr<shm::ShmTransport> shm_;
  std::unique_ptr<tcp::TcpTransport> tcp_;
  std::vector<SendChannel*> sends_;
  std::vector<RecvChannel*> recvs_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Endpoint> connect(const EndpointConfig& config, KeyValue& kv) {
  validate(config);
  auto endpoint = std::make_unique<CompositeEndpoint>(config);
  endpoint->open(kv);
  return endpoint;
}

}  // namespace braid::transport
