// connect(): the composite endpoint that puts shm, tcp and ucx peers behind one Endpoint and one
// doorbell (in this rank's shm inbox when it has one, else a private word the tcp and ucx progress
// threads ring).
#include "transport/transport.h"

#include <atomic>

#include "common/config.h"
#include "common/log.h"
#include "transport/doorbell.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"
#if BRAID_HAVE_UCX
#include "transport/ucx/ucx.h"
#endif

namespace braid::transport {

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kSelf:
      return "self";
    case Kind::kShm:
      return "shm";
    case Kind::kTcp:
      return "tcp";
    case Kind::kUcx:
      return "ucx";
    case Kind::kCudaIpc:
      return "cuda_ipc";
  }
  return "unknown";
}

bool parseKind(const std::string& name, Kind* out) {
  if (name == "shm") {
    *out = Kind::kShm;
  } else if (name == "tcp") {
    *out = Kind::kTcp;
  } else if (name == "ucx") {
    *out = Kind::kUcx;
  } else {
    return false;
  }
  return true;
}

bool kindAvailable(Kind kind, std::string* why) {
  if (kind == Kind::kUcx && !BRAID_HAVE_UCX) {
    if (why != nullptr) {
      *why =
          "this build has no UCX transport (configure found no UCX: apt-get install libucx-dev, "
          "then reconfigure with BRAID_WITH_UCX=AUTO or ON)";
    }
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
      BRAID_ENFORCE(
          kind == Kind::kShm || kind == Kind::kTcp || kind == Kind::kUcx, ErrorCode::kInvalidUsage,
          "rank {}: transport connect: peer rank {} has kind {}", c.rank, p, kindName(kind));
      std::string why;
      BRAID_ENFORCE(kindAvailable(kind, &why), ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer rank {} has kind {}, but {}", c.rank, p,
                    kindName(kind), why);
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
#if BRAID_HAVE_UCX
    ucx_.reset();  // joins the threads that ring the doorbell inside shm_'s inbox
#endif
    tcp_.reset();
    shm_.reset();
  }

  void open(KeyValue& kv) {
    const EndpointConfig& c = config_;
    Deadline deadline = Deadline::after(c.timeoutSeconds);
    bool anyShm = false, anyTcp = false, anyUcx = false;
    for (int p = 0; p < c.size; ++p) {
      anyShm |= c.peerKinds[p] == Kind::kShm;
      anyTcp |= c.peerKinds[p] == Kind::kTcp;
      anyUcx |= c.peerKinds[p] == Kind::kUcx;
    }
    // Publish everything first, then wait for peers: no rank waits on a step another rank can
    // only take after its own wait.
    if (anyShm) shm_ = std::make_unique<shm::ShmTransport>(c, kv);
    if (anyTcp) tcp_ = std::make_unique<tcp::TcpTransport>(c, kv);
#if BRAID_HAVE_UCX
    if (anyUcx) ucx_ = std::make_unique<ucx::UcxTransport>(c, kv);
#endif
    doorbell_ = shm_ ? &shm_->doorbell() : &privateDoorbell_;
    if (shm_) {
      shm_->mapPeers(kv, deadline);
      shm_->unlinkWhenMapped(kv, deadline);
    }
    if (tcp_) {
      tcp_->connectPeers(kv, deadline);
      tcp_->start(doorbell_);
    }
#if BRAID_HAVE_UCX
    if (ucx_) {
      ucx_->connectPeers(kv, deadline);
      ucx_->start(doorbell_);
    }
#endif
    (void)anyUcx;
    for (int p = 0; p < c.size; ++p) {
      for (int ch = 0; ch < c.channels && p != c.rank; ++ch) {
        size_t i = static_cast<size_t>(p) * c.channels + ch;
        if (c.peerKinds[p] == Kind::kShm) {
          sends_[i] = &shm_->send(p, ch);
          recvs_[i] = &shm_->recv(p, ch);
#if BRAID_HAVE_UCX
        } else if (c.peerKinds[p] == Kind::kUcx) {
          sends_[i] = &ucx_->send(p, ch);
          recvs_[i] = &ucx_->recv(p, ch);
#endif
        } else {
          sends_[i] = &tcp_->send(p, ch);
          recvs_[i] = &tcp_->recv(p, ch);
        }
      }
    }
    int counts[4] = {0, 0, 0, 0};
    for (int p = 0; p < c.size; ++p) ++counts[static_cast<int>(c.peerKinds[p])];
    BRAID_INFO(
        "rank {}: transport connected ({} ranks: {} shm, {} tcp, {} ucx peers; {} channels x {} "
        "slots x {} bytes)",
        c.rank, c.size, counts[1], counts[2], counts[3], c.channels, c.slots, c.slotBytes);
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
#if BRAID_HAVE_UCX
    // After the announcement and the caller's last check: a ring from here on ends the sleep.
    if (ucx_) ucx_->beforeUserSleep();
#endif
    sleepOnDoorbell(*doorbell_, ticket, until);
  }

  bool peerAlive(int peer) override {
    checkPeer(peer, 0, true);
    switch (config_.peerKinds[peer]) {
      case Kind::kShm:
        return shm_->peerAlive(peer);
      case Kind::kTcp:
        return tcp_->peerAlive(peer);
      case Kind::kUcx:
#if BRAID_HAVE_UCX
        return ucx_->peerAlive(peer);
#else
        return false;
#endif
      case Kind::kCudaIpc:  // never a peer of a host endpoint (validate() refuses it)
      case Kind::kSelf:
        return true;
    }
    return true;
  }

  void signalAbort(const std::string& reason) override {
    if (aborted_.exchange(true)) return;
    if (shm_) shm_->signalAbort(reason);
    if (tcp_) tcp_->signalAbort(reason);
#if BRAID_HAVE_UCX
    if (ucx_) ucx_->signalAbort(reason);
#endif
    ringDoorbell(*doorbell_);  // a local sleeper (the communicator's thread) wakes up too
  }

  std::optional<std::pair<int, std::string>> peerAbort() override {
    if (shm_) {
      if (auto a = shm_->peerAbort()) return a;
    }
    if (tcp_) {
      if (auto a = tcp_->peerAbort()) return a;
    }
#if BRAID_HAVE_UCX
    if (ucx_) return ucx_->peerAbort();
#endif
    return std::nullopt;
  }

 private:
  void checkPeer(int peer, int channel, bool selfOk) const {
    BRAID_ENFORCE(peer >= 0 && peer < config_.size && (selfOk || peer != config_.rank) &&
                      channel >= 0 && channel < config_.channels,
                  ErrorCode::kInvalidUsage,
                  "rank {}: no channel {} to peer rank {} (size {}, {} channels)", config_.rank,
                  channel, peer, config_.size, config_.channels);
  }

  EndpointConfig config_;
  Doorbell privateDoorbell_;
  Doorbell* doorbell_ = &privateDoorbell_;
  std::unique_ptr<shm::ShmTransport> shm_;
  std::unique_ptr<tcp::TcpTransport> tcp_;
#if BRAID_HAVE_UCX
  std::unique_ptr<ucx::UcxTransport> ucx_;
#endif
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
