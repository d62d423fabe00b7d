// The verbs transport: setup and the calls user threads make. A sender's slot is SlotHeader +
// payload in its own registered memory; post() writes it into the peer's receive slot of the same
// index (chunked RDMA_WRITEs, the last with an immediate naming the slot) from the calling thread
// under mutex_. A release writes the channel's released count into the sender's credit word (the
// clear-to-send). The progress thread polls the completion queue when no user holds mutex_ and
// rings the endpoint's doorbell on every arrival, credit, completed write, abort and failure; it
// sleeps on the completion channel's fd plus the eventfd users write when it announced a sleep
// (the loop is NetworkEndpoint's). This file: setup, registration and the user-side calls;
// connect.cc: the addresses and the queue pairs' transitions; progress.cc: the queue, the hooks
// and the teardown.
#include "transport/verbs/verbs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/env.h"
#include "common/log.h"
#include "transport/process.h"
#include "transport/verbs/channels.h"

namespace braid::transport::verbs {

namespace {

constexpr auto kSpin = std::chrono::microseconds(0);  // as ofi: users drive the queue themselves
constexpr int kMaxQps = 16;

[[noreturn]] void failCall(int rank, const char* call, int error, const std::string& device) {
  fail(ErrorCode::kSystemError, "rank {}: verbs: {} failed: {} (device {})", rank, call,
       std::strerror(error), device);
}

}  // namespace

Settings readSettings(int rank) {
  Settings s;
  s.qps = static_cast<int>(envInt("BRAID_VERBS_QPS", 1));
  BRAID_ENFORCE(s.qps >= 1 && s.qps <= kMaxQps, ErrorCode::kInvalidUsage,
                "rank {}: BRAID_VERBS_QPS={}: choose 1..{} queue pairs per peer", rank, s.qps,
                kMaxQps);
  s.chunkBytes = envBytes("BRAID_VERBS_CHUNK_BYTES").value_or(s.chunkBytes);
  BRAID_ENFORCE(s.chunkBytes >= 64 && s.chunkBytes <= (size_t{1} << 30), ErrorCode::kInvalidUsage,
                "rank {}: BRAID_VERBS_CHUNK_BYTES={}: choose 64 bytes to 1 GiB", rank,
                s.chunkBytes);
  s.timeout = static_cast<int>(envInt("BRAID_VERBS_TIMEOUT", 14));
  BRAID_ENFORCE(s.timeout >= 0 && s.timeout <= 31, ErrorCode::kInvalidUsage,
                "rank {}: BRAID_VERBS_TIMEOUT={}: choose 0..31 (4.096 us x 2^value; 0: infinite)",
                rank, s.timeout);
  s.retry = static_cast<int>(envInt("BRAID_VERBS_RETRY", 7));
  BRAID_ENFORCE(s.retry >= 0 && s.retry <= 7, ErrorCode::kInvalidUsage,
                "rank {}: BRAID_VERBS_RETRY={}: choose 0..7 retransmissions", rank, s.retry);
  s.peerTimeout = envDouble("BRAID_VERBS_PEER_TIMEOUT", 30);
  BRAID_ENFORCE(s.peerTimeout > 0, ErrorCode::kInvalidUsage,
                "rank {}: BRAID_VERBS_PEER_TIMEOUT={} is not a positive number of seconds", rank,
                s.peerTimeout);
  return s;
}

VerbsTransport::VerbsTransport(const EndpointConfig& config, KeyValue& kv)
    : ChannelEndpoint(config, "verbs", SpinPolicy{0, kSpin}, 1),
      settings_(readSettings(config.rank)),
      device_(chooseDevice()) {
  liveness_ = {settings_.peerTimeout, "write", "BRAID_VERBS_PEER_TIMEOUT"};
  const int rank = config.rank;
  BRAID_ENFORCE(device_.usable, ErrorCode::kInvalidUsage, "rank {}: verbs: {}", rank, device_.why);
  BRAID_ENFORCE(
      static_cast<uint64_t>(config.channels) * static_cast<uint64_t>(config.slots) < kControlImm,
      ErrorCode::kInvalidUsage,
      "rank {}: verbs transport: {} channels x {} slots exceed its 31-bit immediate", rank,
      config.channels, config.slots);
  try {
    openDevice();
    pidNamespace_ = pidNamespace();
    hostId_ = hostId();
    std::mt19937 random(std::random_device{}());
    psn_ = random() & 0xffffff;
    const ControlBlockLayout layout(config.channels);
    for (int p = 0; p < config.size; ++p) {
      if (p == rank || config.peerKinds[p] != Kind::kVerbs) continue;
      auto peer = std::make_unique<PeerState>();
      peer->rank = p;
      peer->control = allocateSlots(layout.bytes(), kName);
      std::memset(peer->control.get(), 0, layout.bytes());
      peer->controlMr =
          registerMemory(peer->control.get(), layout.bytes(), "a control block", true);
      trackPeer(peer.get());
      peers_[p] = std::move(peer);
      createQueuePairs(*peers_[p]);
    }
    addChannels();  // the receive slots registered: their addresses and keys are published
    for (auto& peer : peers_) {
      if (!peer) continue;
      kv.set(fmt::format("{}/verbs/{}/{}", config.jobId, rank, peer->rank),
             encodePublished(ownAddress(*peer)));
    }
    BRAID_INFO(
        "rank {}: verbs: device {} port {} ({}, {}){}; {} queue pair(s) per peer, writes of "
        "at most {} bytes, timeout {} retry {}",
        rank, device_.name, device_.port, device_.how, device_.ethernet ? "RoCE" : "InfiniBand",
        device_.gidIndex >= 0 ? fmt::format(", GID {} {} ({})", device_.gidIndex,
                                            gidText(device_.gid), device_.gidHow)
                              : std::string(),
        settings_.qps, settings_.chunkBytes, settings_.timeout, settings_.retry);
  } catch (...) {
    cleanup();  // the destructor does not run for a throwing constructor
    throw;
  }
}

VerbsTransport::~VerbsTransport() {
  stopProgressThread();  // it issues what was posted first (finishStopping)
  cleanup();
}

void VerbsTransport::openDevice() {
  const int rank = config_.rank;
  int count = 0;
  ibv_device** list = verbsCalls().get_device_list(&count);
  BRAID_ENFORCE(list != nullptr, ErrorCode::kSystemError,
                "rank {}: verbs: ibv_get_device_list failed: {}", rank, std::strerror(errno));
  for (int d = 0; d < count && context_ == nullptr; ++d) {
    if (device_.name == verbsCalls().get_device_name(list[d]))
      context_ = verbsCalls().open_device(list[d]);
  }
  const int error = errno;
  verbsCalls().free_device_list(list);
  if (context_ == nullptr) failCall(rank, "ibv_open_device", error, device_.name);
  ibv_device_attr attr{};
  if (int rc = verbsCalls().query_device(context_, &attr); rc != 0) {
    failCall(rank, "ibv_query_device", rc, device_.name);
  }
  pd_ = verbsCalls().alloc_pd(context_);
  if (pd_ == nullptr) failCall(rank, "ibv_alloc_pd", errno, device_.name);
  events_ = verbsCalls().create_comp_channel(context_);
  if (events_ == nullptr) failCall(rank, "ibv_create_comp_channel", errno, device_.name);
  const int flags = fcntl(events_->fd, F_GETFL);
  if (flags < 0 || fcntl(events_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    failCall(rank, "fcntl(completion channel, O_NONBLOCK)", errno, device_.name);
  }
  // Per queue pair: every slot of every channel in flight, each of up to `chunks` writes, plus
  // a credit per slot and a few control writes; receives: a write with an immediate per slot,
  // credit and control write.
  const size_t stride = (kSlotHeaderBytes + config_.slotBytes + 63) / 64 * 64;
  const size_t chunks = (stride + settings_.chunkBytes - 1) / settings_.chunkBytes;
  const size_t perQp = static_cast<size_t>(config_.channels) * config_.slots;
  sendDepth_ = static_cast<int>(std::min<size_t>(perQp * (chunks + 1) + 16, attr.max_qp_wr));
  recvDepth_ = static_cast<int>(std::min<size_t>(2 * perQp + 16, attr.max_qp_wr));
  // A message's writes must fit the send queue: larger chunks where it is short.
  while (static_cast<size_t>(sendDepth_) <
         2 * ((stride + settings_.chunkBytes - 1) / settings_.chunkBytes) + 4) {
    settings_.chunkBytes *= 2;
  }
  int peers = 0;
  for (int p = 0; p < config_.size; ++p)
    peers += p != config_.rank && config_.peerKinds[p] == Kind::kVerbs;
  const size_t cqe = static_cast<size_t>(peers) * settings_.qps * (sendDepth_ + recvDepth_) + 16;
  BRAID_ENFORCE(cqe <= static_cast<size_t>(attr.max_cqe), ErrorCode::kInvalidUsage,
                "rank {}: verbs: {} peers x {} queue pairs need a completion queue of {} entries, "
                "device {} allows {} (fewer slots, channels or BRAID_VERBS_QPS)",
                rank, peers, settings_.qps, cqe, device_.name, attr.max_cqe);
  cq_ = verbsCalls().create_cq(context_, static_cast<int>(cqe), nullptr, events_, 0);
  if (cq_ == nullptr) failCall(rank, "ibv_create_cq", errno, device_.name);
  if (int rc = verbsCalls().req_notify_cq(cq_, 0); rc != 0)
    failCall(rank, "ibv_req_notify_cq", rc, device_.name);
}

void VerbsTransport::createQueuePairs(PeerState& peer) {
  const int rank = config_.rank;
  peer.qps.resize(static_cast<size_t>(settings_.qps));
  for (int q = 0; q < settings_.qps; ++q) {
    QueuePair& qp = peer.qps[q];
    qp.peer = &peer;
    qp.index = q;
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = static_cast<uint32_t>(sendDepth_);
    init.cap.max_recv_wr = static_cast<uint32_t>(recvDepth_);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp.qp = verbsCalls().create_qp(pd_, &init);
    if (qp.qp == nullptr) {
      fail(ErrorCode::kSystemError,
           "rank {}: verbs: ibv_create_qp for peer rank {} (send queue {}, receive queue {}) "
           "failed: {} (device {})",
           rank, peer.rank, sendDepth_, recvDepth_, std::strerror(errno), device_.name);
    }
    byQpn_[qp.qp->qp_num] = &qp;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = static_cast<uint8_t>(device_.port);
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (int rc = verbsCalls().modify_qp(
            qp.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        rc != 0) {
      fail(ErrorCode::kSystemError, "rank {}: verbs: queue pair {} to peer rank {} -> INIT: {}",
           rank, q, peer.rank, std::strerror(rc));
    }
    // Writes with an immediate each take a receive: all of them posted now (allowed in INIT).
    for (int r = 0; r < recvDepth_; ++r) postReceive(qp);
  }
}

ibv_mr* VerbsTransport::registerMemory(void* buffer, size_t bytes, const char* what, bool remote) {
  int access = IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE : 0);
  ibv_mr* mr = verbsCalls().reg_mr(pd_, buffer, bytes, access);
  if (mr == nullptr) {
    fail(ErrorCode::kSystemError,
         "rank {}: verbs: registering {} bytes of {} failed: {} (device {}; a low RLIMIT_MEMLOCK? "
         "ulimit -l)",
         config_.rank, bytes, what, std::strerror(errno), device_.name);
  }
  mrs_.push_back(mr);
  regions_[buffer] = mr;
  return mr;
}

void* VerbsTransport::slotsAllocated(void* buffer, size_t bytes, bool receiving) {
  // Once per channel side: a channel's slots are one allocation for its life, so the
  // registration is cached by buffer and every write from or into them reuses it.
  std::unique_lock<std::mutex> lock = lockAsUser();
  auto it = regions_.find(buffer);
  if (it != regions_.end()) return it->second;
  return registerMemory(buffer, bytes, receiving ? "receive slots" : "send slots", receiving);
}

Published VerbsTransport::ownAddress(PeerState& peer) {
  Published out;
  PeerAddress& a = out.address;
  a.qps = static_cast<uint32_t>(settings_.qps);
  a.channels = static_cast<uint32_t>(config_.channels);
  a.slots = static_cast<uint32_t>(config_.slots);
  a.slotStride = (kSlotHeaderBytes + config_.slotBytes + 63) / 64 * 64;
  a.lid = device_.lid;
  a.ethernet = device_.ethernet ? 1 : 0;
  a.mtu = static_cast<uint8_t>(device_.mtu);
  a.psn = psn_;
  std::memcpy(a.gid, device_.gid.raw, sizeof a.gid);
  a.hostId = hostId_;
  a.pidNamespace = pidNamespace_;
  a.pid = static_cast<uint64_t>(getpid());
  a.controlAddress = reinterpret_cast<uintptr_t>(peer.control.get());
  a.controlKey = peer.controlMr->rkey;
  for (const QueuePair& qp : peer.qps) out.qpns.push_back(qp.qp->qp_num);
  for (int c = 0; c < config_.channels; ++c) {
    VerbsRecvChannel& rc = *recvs_[static_cast<size_t>(peer.rank) * config_.channels + c];
    auto* mr = static_cast<ibv_mr*>(rc.desc_);
    out.regions.push_back({reinterpret_cast<uintptr_t>(rc.buffer_.get()), mr->rkey, 0});
  }
  return out;
}

}  // namespace braid::transport::verbs
