// connect(): the composite endpoint that puts the backends' peers (transport/backend.h: cuda_ipc,
// shm, verbs, ofi, ucx, tcp) behind one Endpoint and one doorbell (the one a backend's peers ring directly:
// this rank's shm inbox or cuda_ipc control record, else a private word the tcp and ucx progress
// threads ring); the backend registry and the choice of a backend per peer.
#include "transport/transport.h"

#include <fmt/format.h>

#include <atomic>

#include "common/log.h"
#include "transport/backend.h"
#include "transport/doorbell.h"

namespace braid::transport {

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> all = {&cudaIpcBackend(), &shmBackend(), &verbsBackend(),
                                                  &ofiBackend(),     &ucxBackend(), &tcpBackend()};
  return all;
}

const Backend* findBackend(Kind kind) {
  for (const Backend* backend : backends()) {
    if (backend->kind() == kind) return backend;
  }
  return nullptr;
}

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
    case Kind::kOfi:
      return "ofi";
    case Kind::kVerbs:
      return "verbs";
  }
  return "unknown";
}

bool parseKind(const std::string& name, Kind* out) {
  for (const Backend* backend : backends()) {
    if (name == backend->name()) {
      *out = backend->kind();
      return true;
    }
  }
  return false;
}

bool kindAvailable(Kind kind, std::string* why) {
  const Backend* backend = findBackend(kind);
  return backend == nullptr || backend->available(why);
}

std::unique_ptr<BackendEndpoint> MissingBackend::open(const EndpointConfig& config,
                                                      KeyValue&) const {
  fail(ErrorCode::kInvalidUsage, "rank {}: transport connect: {}", config.rank, why_);
}

std::string checkForcedKind(const std::string& name) {
  if (name.empty() || name == "auto") return "";
  Kind kind;
  BRAID_ENFORCE(parseKind(name, &kind), ErrorCode::kInvalidUsage,
                "unknown transport '{}' (BRAID_TRANSPORT / --transport): choose shm, tcp, ucx, ofi or verbs",
                name);
  BRAID_ENFORCE(!findBackend(kind)->deviceMemory(), ErrorCode::kInvalidUsage,
                "transport '{}' (BRAID_TRANSPORT / --transport) carries device buffers only (the "
                "device communicator uses it by itself): choose shm, tcp, ucx, ofi or verbs",
                name);
  std::string why;
  BRAID_ENFORCE(kindAvailable(kind, &why), ErrorCode::kInvalidUsage,
                "transport '{}' (BRAID_TRANSPORT / --transport) is not available: {}", name, why);
  return name;
}

std::vector<Kind> chooseKinds(int rank, const std::vector<std::string>& hosts,
                              const std::string& forced, bool deviceMemory) {
  const int size = static_cast<int>(hosts.size());
  BRAID_ENFORCE(rank >= 0 && rank < size, ErrorCode::kInvalidUsage,
                "transport: rank {} outside a world of size {}", rank, size);
  const Backend* force = nullptr;
  BRAID_ENFORCE(!deviceMemory || forced.empty() || forced == "auto", ErrorCode::kInvalidUsage,
                "rank {}: transport '{}' forced for device buffers: they take cuda_ipc", rank,
                forced);
  if (!checkForcedKind(forced).empty()) {
    Kind kind;
    parseKind(forced, &kind);
    force = findBackend(kind);
  }
  const HostInfo local{hosts[rank]};
  std::vector<Kind> kinds(size, Kind::kSelf);
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    const HostInfo peer{hosts[q]};
    if (force != nullptr) {
      // Forced: every peer that kind (ucx also on one host: tests and measurements).
      BRAID_ENFORCE(force->canReach(local, peer), ErrorCode::kInvalidUsage,
                    "rank {}: BRAID_TRANSPORT={}, but peer rank {} is on another host ({} vs {})",
                    rank, force->name(), q, peer.host, local.host);
      kinds[q] = force->kind();
      continue;
    }
    // Best first: shm on one host; between hosts verbs with an active RDMA port, then ofi with a
    // hardware provider, else ucx when this build has it, else tcp. Device buffers: cuda_ipc on one host.
    const Backend* best = nullptr;
    std::string lacking;
    for (const Backend* backend : backends()) {
      if (backend->deviceMemory() != deviceMemory) continue;
      std::string why;
      if (!backend->available(&why)) {
        lacking += fmt::format("; {}: {}", backend->name(), why);
      } else if (!backend->automatic(nullptr)) {
        continue;  // only when forced (ofi with a software provider)
      } else if (backend->canReach(local, peer)) {
        best = backend;
        break;
      }
    }
    BRAID_ENFORCE(best != nullptr, ErrorCode::kInvalidUsage,
                  "rank {}: no transport for {} reaches peer rank {} (host {}, this rank's {}){}",
                  rank, deviceMemory ? "device buffers" : "host buffers", q, peer.host, local.host,
                  lacking);
    kinds[q] = best->kind();
  }
  return kinds;
}

std::string describeBackends() {
  std::string out;
  for (const Backend* backend : backends()) {
    if (backend->deviceMemory()) continue;
    std::string why;
    if (!backend->available(&why)) {
      out += fmt::format("{}: not available: {}\n", backend->name(), why);
      continue;
    }
    const bool chosen = backend->automatic(&why);
    const std::string detail = backend->detail();
    out += fmt::format("{}: available, {}{}{}{}\n", backend->name(),
                       chosen ? "picked by default where it reaches" : "only when forced",
                       why.empty() ? "" : " (" + why + ")", detail.empty() ? "" : "; ", detail);
  }
  return out;
}

namespace {

void validate(const EndpointConfig& c) {
  BRAID_ENFORCE(c.size >= 1 && c.rank >= 0 && c.rank < c.size, ErrorCode::kInvalidUsage,
                "transport connect: rank {} outside a world of size {}", c.rank, c.size);
  BRAID_ENFORCE(static_cast<int>(c.peerKinds.size()) == c.size, ErrorCode::kInvalidUsage,
                "rank {}: transport connect: {} peer kinds for a world of size {}", c.rank,
                c.peerKinds.size(), c.size);
  const Backend* first = nullptr;  // of the first peer: every other's memory must be the same
  for (int p = 0; p < c.size; ++p) {
    Kind kind = c.peerKinds[p];
    if (p == c.rank) {
      BRAID_ENFORCE(kind == Kind::kSelf, ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: own peer kind is {}, not self", c.rank,
                    kindName(kind));
    } else {
      BRAID_ENFORCE(findBackend(kind) != nullptr, ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer rank {} has kind {}", c.rank, p,
                    kindName(kind));
      std::string why;
      BRAID_ENFORCE(kindAvailable(kind, &why), ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer rank {} has kind {}, but {}", c.rank, p,
                    kindName(kind), why);
      const Backend* backend = findBackend(kind);
      if (first == nullptr) first = backend;
      BRAID_ENFORCE(backend->deviceMemory() == first->deviceMemory(), ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer rank {} has kind {} and another {}: one "
                    "endpoint carries device or host buffers, not both",
                    c.rank, p, kindName(kind), first->name());
      BRAID_ENFORCE(!backend->deviceMemory() || c.device >= 0, ErrorCode::kInvalidUsage,
                    "rank {}: transport connect: peer rank {} has kind {}, which needs a CUDA "
                    "device (EndpointConfig::device is {})",
                    c.rank, p, kindName(kind), c.device);
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
    enableLightRinging();  // before any peer can sleep on a ring of ours (doorbell.h)
    sends_.resize(static_cast<size_t>(config.size) * config.channels, nullptr);
    recvs_.resize(static_cast<size_t>(config.size) * config.channels, nullptr);
    byPeer_.resize(config.size, nullptr);
  }
  ~CompositeEndpoint() override {
    // Last opened first: the threads that ring the doorbell inside the shm inbox end before it.
    while (!parts_.empty()) parts_.pop_back();
  }

  void open(KeyValue& kv) {
    const EndpointConfig& c = config_;
    Deadline deadline = Deadline::after(c.timeoutSeconds);
    // Publish everything first, then wait for peers: no rank waits on a step another rank can
    // only take after its own wait.
    for (const Backend* backend : backends()) {
      bool used = false;
      for (int p = 0; p < c.size; ++p) used |= c.peerKinds[p] == backend->kind();
      if (!used) continue;
      parts_.push_back(backend->open(c, kv));
    }
    for (auto& part : parts_) part->connectPeers(kv, deadline);
    // A doorbell peers ring directly exists once connected (cuda_ipc's is in rank 0's segment).
    for (auto& part : parts_) {
      if (Doorbell* own = part->ownDoorbell()) doorbell_ = own;
    }
    for (auto& part : parts_) part->start(doorbell_);
    for (auto& part : parts_) {
      for (int p = 0; p < c.size; ++p) {
        if (p == c.rank || c.peerKinds[p] != part->kind()) continue;
        byPeer_[p] = part.get();
        for (int ch = 0; ch < c.channels; ++ch) {
          size_t i = static_cast<size_t>(p) * c.channels + ch;
          sends_[i] = &part->send(p, ch);
          recvs_[i] = &part->recv(p, ch);
        }
      }
    }
    std::string peers;
    for (const Backend* backend : backends()) {
      int n = 0;
      for (int p = 0; p < c.size; ++p) n += c.peerKinds[p] == backend->kind();
      if (n > 0) peers += fmt::format("{}{} {}", peers.empty() ? "" : ", ", n, backend->name());
    }
    BRAID_INFO(
        "rank {}: transport connected ({} ranks: {} peers; {} channels x {} slots x {} bytes)",
        c.rank, c.size, peers.empty() ? "no" : peers, c.channels, c.slots, c.slotBytes);
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
  void wake() override { ringDoorbellIfSleeping(*doorbell_); }
  void sleep(uint32_t ticket, Clock::time_point until) override {
    // After the announcement and the caller's last check: a ring from here on ends the sleep.
    for (auto& part : parts_) part->beforeUserSleep();
    sleepOnDoorbell(*doorbell_, ticket, until);
  }

  bool peerAlive(int peer) override {
    checkPeer(peer, 0, true);
    // Self, or (never) a kind validate() refuses: alive.
    return byPeer_[peer] == nullptr || byPeer_[peer]->peerAlive(peer);
  }

  void signalAbort(const std::string& reason) override {
    if (aborted_.exchange(true)) return;
    for (auto& part : parts_) part->signalAbort(reason);
    ringDoorbell(*doorbell_);  // a local sleeper (the communicator's thread) wakes up too
  }

  std::optional<std::pair<int, std::string>> peerAbort() override {
    for (auto& part : parts_) {
      if (auto a = part->peerAbort()) return a;
    }
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
  std::vector<std::unique_ptr<BackendEndpoint>> parts_;  // registry order
  std::vector<BackendEndpoint*> byPeer_;                 // nullptr for self
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
