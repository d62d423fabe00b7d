// The ucx transport: setup and the calls user threads make. A sender's slot is SlotHeader +
// payload in its own memory; post() sends it as one tagged message (ucp_tag_send_nbx) into the
// receive the peer pre-posted for that channel and slot index, from the calling thread under the
// worker's mutex. Credits work as in tcp: at most K messages per channel are posted and not yet
// released by the receiver; each release re-posts that slot's receive and sends the cumulative
// released count back as an active message. The progress thread drives the worker whenever no
// user does and rings the endpoint's doorbell on every arrival, credit, completed send, abort
// and failure; it sleeps on the worker's event fd (ucp_worker_arm) plus an eventfd user threads
// write when it announced a sleep (the doorbell's Dekker protocol again; the loop is
// NetworkEndpoint's). This file: setup and the user-side calls; connect.cc: endpoints and the
// hello; progress.cc: the progress thread's hooks, callbacks and teardown.
#include "transport/ucx/ucx.h"
#include "transport/ucx/libucx.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "common/env.h"
#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/process.h"
#include "transport/ucx/channels.h"

namespace braid::transport::ucx {

namespace {

// The progress thread spins this long after its last activity before it sleeps on the worker.
constexpr auto kSpin = std::chrono::microseconds(50);

ucs_status_t controlCallback(void* arg, const void* header, size_t headerBytes, void* data,
                             size_t bytes, const ucp_am_recv_param_t* param) {
  static_cast<UcxTransport*>(arg)->onControl(header, headerBytes, data, bytes, param);
  return UCS_OK;  // the data is not kept
}

}  // namespace

UcxTransport::UcxTransport(const EndpointConfig& config, KeyValue& kv)
    : UcxBase(config, "ucx", SpinPolicy{0, kSpin}, 0) {
  const int rank = config.rank;
  BRAID_ENFORCE(
      config.size <= kMaxRanks && config.channels <= kMaxChannels && config.slots <= kMaxSlots,
      ErrorCode::kInvalidUsage,
      "rank {}: ucx transport: {} ranks, {} channels, {} slots exceed its tag space", rank,
      config.size, config.channels, config.slots);
  if (const char* tls = std::getenv("UCX_TLS")) tls_ = tls;
  std::string notLoaded;
  BRAID_ENFORCE(libucx(&notLoaded) != nullptr, ErrorCode::kSystemError, "rank {}: ucx: {}", rank,
                notLoaded);
  try {
    ucp_config_t* ucxConfig = nullptr;
    ucs_status_t status = ucx().ucp_config_read(nullptr, nullptr, &ucxConfig);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: reading the UCX configuration failed: {}", rank,
           ucx().ucs_status_string(status));
    }
    // Every message is one slot copied into a receive posted in advance, so the rendezvous
    // protocol's extra round trip buys nothing: eager for every size unless the user says
    // otherwise (over tcp, 2 hosts x 2 ranks at 1 Gbit/s: 99% of the link instead of 83%).
    if (std::getenv("UCX_RNDV_THRESH") == nullptr) {
      ucx().ucp_config_modify(ucxConfig, "RNDV_THRESH", "inf");
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = static_cast<size_t>(config.size);
    status = ucx().ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, ucxConfig, &context_);
    ucx().ucp_config_release(ucxConfig);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_init failed: {} (UCX_TLS={})", rank,
           ucx().ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    ucp_worker_params_t workerParams{};
    workerParams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    workerParams.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // mutex_ serialises
    status = ucx().ucp_worker_create(context_, &workerParams, &worker_);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_create failed: {} (UCX_TLS={})", rank,
           ucx().ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    status = ucx().ucp_worker_get_efd(worker_, &workerFd_);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_get_efd failed: {}", rank,
           ucx().ucs_status_string(status));
    }
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = kAmControl;
    handler.cb = controlCallback;
    handler.arg = this;
    status = ucx().ucp_worker_set_am_recv_handler(worker_, &handler);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: setting the active message handler failed: {}",
           rank, ucx().ucs_status_string(status));
    }

    for (int p = 0; p < config.size; ++p) {
      if (p == rank || config.peerKinds[p] != Kind::kUcx) continue;
      peers_[p] = std::make_unique<PeerState>();
      peers_[p]->rank = p;
      peers_[p]->owner = this;
      trackPeer(peers_[p].get());
    }
    addChannels();
    for (auto& rc : recvs_) {
      for (int s = 0; rc && s < config.slots; ++s) irecv(*rc, static_cast<uint32_t>(s));
    }
    pidNamespace_ = pidNamespace();
    hostId_ = hostId();

    ucp_address_t* address = nullptr;
    size_t addressBytes = 0;
    status = ucx().ucp_worker_get_address(worker_, &address, &addressBytes);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_get_address failed: {}", rank,
           ucx().ucs_status_string(status));
    }
    // "<host id>:<pid namespace>:<address>": peers on this host pick the error mode by it.
    std::string value =
        fmt::format("{:x}:{:x}:{}", hostId_, pidNamespace_, toHex(address, addressBytes));
    ucx().ucp_worker_release_address(worker_, address);
    kv.set(fmt::format("{}/ucx/{}", config.jobId, rank), value);
  } catch (...) {
    cleanup();  // the destructor does not run for a throwing constructor
    throw;
  }
}

UcxTransport::~UcxTransport() {
  stopProgressThread();  // it issues what was posted first (finishStopping)
  cleanup();
}

void UcxTransport::pollSoon() {
  // Only while the progress thread sleeps: then a waiting user sees an arrival without a thread
  // switch; while it runs, it progresses anyway and a second poller only contends (and burns the
  // cores the peers need).
  if (!wake_.sleeping()) return;
  // A progress call that costs system calls (UCX over tcp: epoll per interface) is made only on
  // every 32nd call here: a spinning user would otherwise take the cores its peers need. Over
  // shared memory a call is a few loads, and every call polls.
  if (pollSkip_ > 0) {
    --pollSkip_;
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  auto start = Clock::now();
  unsigned events = ucx().ucp_worker_progress(worker_);
  if (events != 0) userTouched_.store(true, std::memory_order_relaxed);
  pollSkip_ = Clock::now() - start > std::chrono::microseconds(1) ? 31 : 0;
}

void UcxTransport::beforeUserSleep() {
  // The progress thread may have armed the worker before this thread drove it; then work may
  // wait inside UCX that no event fd announces (a half-done protocol, a queued send). Make the
  // progress thread look again before the user sleeps on it. Only the progress thread clears the
  // flag (when it progresses instead of arming), so a wake-up is never lost between the two.
  if (userTouched_.load(std::memory_order_relaxed)) wakeProgress();
}

}  // namespace braid::transport::ucx
