// The ofi transport: setup and the calls user threads make. A sender's slot is SlotHeader +
// payload in its own memory; post() sends it as one tagged message (fi_tsend) into the receive
// the peer pre-posted for that channel and slot, from the calling thread under mutex_.
// Credits as in ucx (network/tagged_channels.h). The progress thread drains the completion
// queue whenever no user holds the mutex and rings the endpoint's doorbell on every arrival,
// credit, completed send, abort and failure; it sleeps on the queue's wait fd plus the eventfd
// users write when it announced a sleep (the loop is NetworkEndpoint's). This file: setup, memory
// registration and the user-side calls; connect.cc: addresses and the hello; progress.cc: the
// queue, the progress thread's hooks and the teardown.
#include "transport/ofi/ofi.h"
#include "transport/ofi/libfabric.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "common/env.h"
#include "common/log.h"
#include "transport/ofi/channels.h"
#include "transport/process.h"

namespace braid::transport::ofi {

namespace {

// The progress thread sleeps on the queue as soon as a round finds nothing: users drive the queue
// themselves when they post or release (flushSoon), and a spinning thread holding the fabric
// mutex took the cores the ranks need (2 ranks on 2 busy cores: an 8-byte all-reduce 570 us
// with a 50 us spin, 130-200 us without).
constexpr auto kSpin = std::chrono::microseconds(0);
constexpr int kControlSendsPerPeer = 4;  // control send buffers: this many per peer, plus 8
// Control receives posted for each peer (exact tags). More may arrive at once (up to channels x
// slots credits, a heartbeat, an abort): the provider keeps those as unexpected messages until a
// receive is posted again.
constexpr int kControlRecvsPerPeer = 8;

[[noreturn]] void failCall(int rank, const char* call, int rc, const std::string& provider) {
  fail(ErrorCode::kSystemError, "rank {}: ofi: {} failed: {} (provider {})", rank, call,
       fiError(-rc), provider);
}

}  // namespace

OfiTransport::OfiTransport(const EndpointConfig& config, KeyValue& kv)
    : ChannelEndpoint(config, "ofi", SpinPolicy{0, kSpin}, 1), provider_(chooseProvider()) {
  const int rank = config.rank;
  BRAID_ENFORCE(
      config.size <= kMaxRanks && config.channels <= kMaxChannels && config.slots <= kMaxSlots,
      ErrorCode::kInvalidUsage,
      "rank {}: ofi transport: {} ranks, {} channels, {} slots exceed its tag space", rank,
      config.size, config.channels, config.slots);
  BRAID_ENFORCE(provider_.usable, ErrorCode::kInvalidUsage, "rank {}: ofi: {}", rank,
                provider_.why);
  liveness_ = {envDouble("BRAID_OFI_PEER_TIMEOUT", 30), "message", "BRAID_OFI_PEER_TIMEOUT"};
  BRAID_ENFORCE(liveness_.seconds > 0, ErrorCode::kInvalidUsage,
                "rank {}: BRAID_OFI_PEER_TIMEOUT={} is not a positive number of seconds", rank,
                liveness_.seconds);
  try {
    openFabric();
    int ofiPeers = 0;
    std::vector<int> receivesFrom;  // the control receives' senders
    for (int p = 0; p < config.size; ++p) {
      if (p == rank || config.peerKinds[p] != Kind::kOfi) continue;
      peers_[p] = std::make_unique<PeerState>();
      peers_[p]->rank = p;
      peers_[p]->regions.resize(static_cast<size_t>(config.channels));
      trackPeer(peers_[p].get());
      ++ofiPeers;
      receivesFrom.insert(receivesFrom.end(), kControlRecvsPerPeer, p);
    }
    control_ = std::make_unique<ControlPool>(std::move(receivesFrom),
                                             kControlSendsPerPeer * ofiPeers + 8);
    control_->desc =
        registerMemory(control_->memory.get(), control_->bytes(), "control buffers", false);
    for (int i = 0; i < control_->recvCount; ++i) {
      BRAID_ENFORCE(postControlRecv(static_cast<uint32_t>(i)), ErrorCode::kSystemError,
                    "rank {}: ofi: the provider {} took only {} control receives", rank,
                    provider_.name, i);
    }
    addChannels();
    for (auto& rc : recvs_) {
      for (int s = 0; rc && s < config.slots; ++s) {
        if (useRma_) {  // peers write into the slots: nothing to post
          rc->slots_[s].posted = true;
          continue;
        }
        irecv(*rc, static_cast<uint32_t>(s));
        BRAID_ENFORCE(rc->slots_[s].posted, ErrorCode::kSystemError,
                      "rank {}: ofi: the provider {} refused the receive for peer rank {} "
                      "channel {} slot {} (receive queue size {})",
                      rank, provider_.name, rc->peer(), rc->channel_, s, info_->rx_attr->size);
      }
    }
    pidNamespace_ = pidNamespace();
    hostId_ = hostId();
    size_t length = 0;
    fi_getname(&ep_->fid, nullptr, &length);
    Published own;
    own.provider = provider_.name;
    own.path = useRma_ ? "rma" : "tagged";
    own.where = fmt::format("{:x}:{:x}", hostId_, pidNamespace_);
    own.address.assign(length, '\0');
    if (int rc = fi_getname(&ep_->fid, own.address.data(), &length); rc != 0) {
      failCall(rank, "fi_getname", rc, provider_.name);
    }
    own.address.resize(length);
    kv.set(fmt::format("{}/ofi/{}", config.jobId, rank), encodePublished(own));
    BRAID_INFO("rank {}: ofi: libfabric provider {} ({}); data {}; memory registration {}; {}",
               rank, provider_.name, provider_.how, dataPathWhy_,
               mrLocal_ ? "local (FI_MR_LOCAL)" : useRma_ ? "receive slots only" : "none",
               cqFd_ >= 0 ? "sleeps on the completion queue's fd" : "polls in 1 ms steps");
  } catch (...) {
    cleanup();  // the destructor does not run for a throwing constructor
    throw;
  }
}

OfiTransport::~OfiTransport() {
  stopProgressThread();  // it issues what was posted first (finishStopping)
  cleanup();
}

void OfiTransport::chooseDataPath() {
  const int rank = config_.rank;
  const std::string rma = envString("BRAID_OFI_RMA").value_or("auto");
  BRAID_ENFORCE(rma == "auto" || rma == "on" || rma == "off", ErrorCode::kInvalidUsage,
                "rank {}: BRAID_OFI_RMA='{}': choose auto, on or off", rank, rma);
  std::string why;
  if (rma == "off") {
    dataPathWhy_ = "as tagged messages (BRAID_OFI_RMA=off)";
  } else if (!provider_.rma) {
    why = "the provider offers no FI_RMA";
  } else {
    info_ = getInfo(provider_.name, true, &why);
    const double slotsNeeded = static_cast<double>(config_.size) * config_.channels * config_.slots;
    if (info_ == nullptr) {
      // why: fi_getinfo's
    } else if ((info_->mode & FI_RX_CQ_DATA) != 0) {
      why = "the provider wants posted receives for remote CQ data (FI_RX_CQ_DATA)";
    } else if (info_->domain_attr->cq_data_size < 8 &&
               slotsNeeded >= std::ldexp(1.0, 8 * static_cast<int>(info_->domain_attr->cq_data_size))) {
      why = fmt::format("{} slots do not fit its {}-byte immediate", slotsNeeded,
                        info_->domain_attr->cq_data_size);
    } else {
      useRma_ = true;
      dataPathWhy_ = "as remote writes (fi_writedata, the slot in the immediate)";
      return;
    }
  }
  if (!why.empty()) {
    BRAID_ENFORCE(rma != "on", ErrorCode::kInvalidUsage,
                  "rank {}: BRAID_OFI_RMA=on, but provider {} cannot: {}", rank, provider_.name, why);
    dataPathWhy_ = "as tagged messages (no RMA: " + why + ")";
  }
  info_.reset();
}

void OfiTransport::openFabric() {
  const int rank = config_.rank;
  chooseDataPath();
  std::string why;
  if (!info_) info_ = getInfo(provider_.name, false, &why);
  BRAID_ENFORCE(info_ != nullptr, ErrorCode::kSystemError, "rank {}: ofi: {}", rank, why);
  giveUniqueSourceName(info_.get());
  const std::string mr = envString("BRAID_OFI_MR").value_or("auto");
  BRAID_ENFORCE(mr == "auto" || mr == "local", ErrorCode::kInvalidUsage,
                "rank {}: BRAID_OFI_MR='{}': choose auto or local", rank, mr);
  mrLocal_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0 || mr == "local";
  if (int rc = libfabric()->fabric(info_->fabric_attr, &fabric_, nullptr); rc != 0) {
    failCall(rank, "fi_fabric", rc, provider_.name);
  }
  if (int rc = fi_domain(fabric_, info_.get(), &domain_, nullptr); rc != 0) {
    failCall(rank, "fi_domain", rc, provider_.name);
  }
  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.wait_obj = FI_WAIT_FD;
  cqAttr.size = static_cast<size_t>(config_.size) * config_.channels * config_.slots * 2 +
                static_cast<size_t>(config_.size) * 16 + 64;
  if (fi_cq_open(domain_, &cqAttr, &cq_, nullptr) != 0) {
    cqAttr.wait_obj = FI_WAIT_NONE;  // no wait fd here: the progress thread sleeps in steps
    if (int rc = fi_cq_open(domain_, &cqAttr, &cq_, nullptr); rc != 0) {
      failCall(rank, "fi_cq_open", rc, provider_.name);
    }
  } else if (fi_control(&cq_->fid, FI_GETWAIT, &cqFd_) != 0) {
    cqFd_ = -1;
  }
  fi_av_attr avAttr{};
  avAttr.type = info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE
                                                            : info_->domain_attr->av_type;
  avAttr.count = static_cast<size_t>(config_.size);
  if (int rc = fi_av_open(domain_, &avAttr, &av_, nullptr); rc != 0) {
    failCall(rank, "fi_av_open", rc, provider_.name);
  }
  if (int rc = fi_endpoint(domain_, info_.get(), &ep_, nullptr); rc != 0) {
    failCall(rank, "fi_endpoint", rc, provider_.name);
  }
  if (int rc = fi_ep_bind(ep_, &av_->fid, 0); rc != 0) {
    failCall(rank, "fi_ep_bind(av)", rc, provider_.name);
  }
  if (int rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV); rc != 0) {
    failCall(rank, "fi_ep_bind(cq)", rc, provider_.name);
  }
  if (int rc = fi_enable(ep_); rc != 0) failCall(rank, "fi_enable", rc, provider_.name);
}

void* OfiTransport::registerMemory(void* buffer, size_t bytes, const char* what, bool remote) {
  if (!mrLocal_ && !remote) return nullptr;
  // Keys: a provider with FI_MR_PROV_KEY chooses them; else braid does, unique per domain.
  const bool providerKeys = (info_->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  fid_mr* mr = nullptr;
  const uint64_t access = FI_SEND | FI_RECV | (useRma_ ? FI_WRITE : 0) | (remote ? FI_REMOTE_WRITE : 0);
  int rc = fi_mr_reg(domain_, buffer, bytes, access, 0, providerKeys ? 0 : nextKey_++, 0, &mr,
                     nullptr);
  if (rc == 0 && (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
  }
  if (mr != nullptr) {
    mrs_.push_back(mr);
    regions_[buffer] = mr;
  }
  if (rc != 0) {
    fail(ErrorCode::kSystemError, "rank {}: ofi: registering {} bytes of {} failed: {} (provider {})",
         config_.rank, bytes, what, fiError(-rc), provider_.name);
  }
  return fi_mr_desc(mr);
}

void* OfiTransport::slotsAllocated(void* buffer, size_t bytes, bool receiving) {
  const bool remote = receiving && useRma_;  // peers write into our receive slots
  if (!mrLocal_ && !remote) return nullptr;
  std::unique_lock<std::mutex> lock = lockAsUser();
  return registerMemory(buffer, bytes, receiving ? "receive slots" : "send slots", remote);
}

}  // namespace braid::transport::ofi
