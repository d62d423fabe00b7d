// The ucx transport: setup and the calls user threads make. A sender's slot is SlotHeader +
// payload in its own memory; post() sends it as one tagged message (ucp_tag_send_nbx) into the
// receive the peer pre-posted for that channel and slot index, from the calling thread under the
// worker's mutex. Credits work as in tcp: at most K messages per channel are posted and not yet
// released by the receiver; each release re-posts that slot's receive and sends the cumulative
// released count back as an active message. The progress thread drives the worker whenever no
// user does and rings the endpoint's doorbell on every arrival, credit, completed send, abort
// and failure; it sleeps on the worker's event fd (ucp_worker_arm) plus an eventfd user threads
// write when it announced a sleep (the doorbell's Dekker protocol again). This file: setup,
// hello, the user-side calls; progress.cc: the progress thread, callbacks and teardown.
#include "transport/ucx/ucx.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "common/env.h"
#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/process.h"
#include "transport/ucx/channels.h"

namespace braid::transport::ucx {

namespace {

std::string toHex(const void* data, size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* in = static_cast<const unsigned char*>(data);
  std::string out(bytes * 2, '0');
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kDigits[in[i] >> 4];
    out[2 * i + 1] = kDigits[in[i] & 15];
  }
  return out;
}

bool fromHex(const std::string& text, std::string* out) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.empty() || text.size() % 2 != 0) return false;
  out->assign(text.size() / 2, '\0');
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<char>(hi * 16 + lo);
  }
  return true;
}

// Hostname plus boot id: equal only for processes on one running kernel.
uint64_t hostId() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string text = name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  text += "/" + id;
  return std::hash<std::string>{}(text);
}

ucs_status_t controlCallback(void* arg, const void* header, size_t headerBytes, void* data,
                             size_t bytes, const ucp_am_recv_param_t* param) {
  static_cast<UcxTransport*>(arg)->onControl(header, headerBytes, data, bytes, param);
  return UCS_OK;  // the data is not kept
}

void endpointErrorCallback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<PeerState*>(arg);
  peer->owner->onEndpointError(*peer, status);
}

}  // namespace

UcxTransport::UcxTransport(const EndpointConfig& config, KeyValue& kv)
    : config_(config), peers_(config.size) {
  const int rank = config.rank;
  BRAID_ENFORCE(
      config.size <= kMaxRanks && config.channels <= kMaxChannels && config.slots <= kMaxSlots,
      ErrorCode::kInvalidUsage,
      "rank {}: ucx transport: {} ranks, {} channels, {} slots exceed its tag space", rank,
      config.size, config.channels, config.slots);
  if (const char* tls = std::getenv("UCX_TLS")) tls_ = tls;
  try {
    ucp_config_t* ucxConfig = nullptr;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &ucxConfig);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: reading the UCX configuration failed: {}", rank,
           ucs_status_string(status));
    }
    // Every message is one slot copied into a receive posted in advance, so the rendezvous
    // protocol's extra round trip buys nothing: eager for every size unless the user says
    // otherwise (over tcp, 2 hosts x 2 ranks at 1 Gbit/s: 99% of the link instead of 83%).
    if (std::getenv("UCX_RNDV_THRESH") == nullptr) {
      ucp_config_modify(ucxConfig, "RNDV_THRESH", "inf");
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = static_cast<size_t>(config.size);
    status = ucp_init(&params, ucxConfig, &context_);
    ucp_config_release(ucxConfig);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_init failed: {} (UCX_TLS={})", rank,
           ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    ucp_worker_params_t workerParams{};
    workerParams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    workerParams.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // workerMutex_ serialises
    status = ucp_worker_create(context_, &workerParams, &worker_);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_create failed: {} (UCX_TLS={})", rank,
           ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    status = ucp_worker_get_efd(worker_, &workerFd_);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_get_efd failed: {}", rank,
           ucs_status_string(status));
    }
    wake_.open(fmt::format("rank {}: ucx: eventfd", rank));
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = kAmControl;
    handler.cb = controlCallback;
    handler.arg = this;
    status = ucp_worker_set_am_recv_handler(worker_, &handler);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: setting the active message handler failed: {}",
           rank, ucs_status_string(status));
    }

    for (int p = 0; p < config.size; ++p) {
      if (p == rank || config.peerKinds[p] != Kind::kUcx) continue;
      peers_[p] = std::make_unique<PeerState>();
      peers_[p]->rank = p;
      peers_[p]->owner = this;
    }
    sends_.resize(static_cast<size_t>(config.size) * config.channels);
    recvs_.resize(static_cast<size_t>(config.size) * config.channels);
    for (int p = 0; p < config.size; ++p) {
      if (!peers_[p]) continue;
      for (int c = 0; c < config.channels; ++c) {
        size_t i = static_cast<size_t>(p) * config.channels + c;
        sends_[i] = std::make_unique<UcxSendChannel>(this, peers_[p].get(), config, c);
        recvs_[i] = std::make_unique<UcxRecvChannel>(this, peers_[p].get(), config, c);
        for (int s = 0; s < config.slots; ++s) postRecv(*recvs_[i], static_cast<uint32_t>(s));
      }
    }
    pidNamespace_ = pidNamespace();
    hostId_ = hostId();

    ucp_address_t* address = nullptr;
    size_t addressBytes = 0;
    status = ucp_worker_get_address(worker_, &address, &addressBytes);
    if (status != UCS_OK) {
      fail(ErrorCode::kSystemError, "rank {}: ucx: ucp_worker_get_address failed: {}", rank,
           ucs_status_string(status));
    }
    // "<host id>:<pid namespace>:<address>": peers on this host pick the error mode by it.
    std::string value =
        fmt::format("{:x}:{:x}:{}", hostId_, pidNamespace_, toHex(address, addressBytes));
    ucp_worker_release_address(worker_, address);
    kv.set(fmt::format("{}/ucx/{}", config.jobId, rank), value);
  } catch (...) {
    cleanup();  // the destructor does not run for a throwing constructor
    throw;
  }
}

UcxTransport::~UcxTransport() {
  stopping_.store(true);
  wake_.kick();
  if (thread_.joinable()) thread_.join();
  cleanup();
}

void UcxTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
  Hello hello;
  hello.size = config_.size;
  hello.jobIdBytes = static_cast<uint32_t>(config_.jobId.size());
  hello.secretBytes = static_cast<uint32_t>(config_.secret.size());
  hello.pid = static_cast<uint64_t>(getpid());
  hello.pidNamespace = pidNamespace_;
  hello.hostId = hostId_;
  // BRAID_UCX_ERR_MODE=peer|none overrides the choice below (auto).
  const std::string errMode = envString("BRAID_UCX_ERR_MODE").value_or("auto");
  BRAID_ENFORCE(errMode == "auto" || errMode == "peer" || errMode == "none",
                ErrorCode::kInvalidUsage,
                "rank {}: BRAID_UCX_ERR_MODE='{}': choose auto, peer or none", rank, errMode);
  for (auto& peer : peers_) {
    if (!peer) continue;
    const std::string key = fmt::format("{}/ucx/{}", config_.jobId, peer->rank);
    std::string hex;
    hex = getPeerKey(kv, key, deadline, rank, peer->rank, "ucx", "publish its address");
    std::string address;
    size_t colon1 = hex.find(':');
    size_t colon2 = colon1 == std::string::npos ? colon1 : hex.find(':', colon1 + 1);
    BRAID_ENFORCE(colon2 != std::string::npos && fromHex(hex.substr(colon2 + 1), &address),
                  ErrorCode::kRemoteError,
                  "rank {}: ucx: peer rank {} published a malformed worker address under '{}'",
                  rank, peer->rank, key);
    // A peer on this host, in this pid namespace: its death is seen by the kernel (peerAlive),
    // so UCX may use shared memory, whose transports have no peer failure handling. Elsewhere
    // UCX must report failures (its transports there do).
    const bool local = hex.substr(0, colon2) == fmt::format("{:x}:{:x}", hostId_, pidNamespace_) &&
                       pidNamespace_ != 0;
    peer->peerErrors = errMode == "auto" ? !local : errMode == "peer";
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = peer->peerErrors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = endpointErrorCallback;
    params.err_handler.arg = peer.get();
    ucs_status_t status = ucp_ep_create(worker_, &params, &peer->ep);
    if (status != UCS_OK) {
      peer->ep = nullptr;
      fail(ErrorCode::kSystemError,
           "rank {}: ucx: creating the endpoint to peer rank {} failed: {} (UCX_TLS={})", rank,
           peer->rank, ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    hello.target = peer->rank;
    std::string payload(reinterpret_cast<const char*>(&hello), sizeof hello);
    payload += config_.jobId + config_.secret;
    sendControl(*peer, kHello, 0, 0, std::move(payload));
  }
  // Progress here until every peer's hello arrived: then both directions are wired up.
  while (true) {
    std::string missing;
    for (auto& peer : peers_) {
      if (!peer) continue;
      if (!peer->alive.load()) {
        fail(ErrorCode::kRemoteError,
             "rank {}: ucx connection to peer rank {} failed: {} (UCX_TLS={})", rank, peer->rank,
             peer->reason, tls_.empty() ? "unset" : tls_);
      }
      if (!peer->helloSeen) missing += (missing.empty() ? "" : ", ") + std::to_string(peer->rank);
    }
    if (missing.empty()) break;
    if (deadline.expired()) {
      fail(ErrorCode::kTimeout,
           "rank {}: ucx connect timed out waiting for the hello of peer rank(s) {} (UCX_TLS={})",
           rank, missing, tls_.empty() ? "unset" : tls_);
    }
    if (ucp_worker_progress(worker_) == 0)
      waitForEvents(std::min(deadline.millisLeft(), 10), nullptr);
  }
  for (auto& peer : peers_) {
    if (peer) peer->checkPid = !peer->peerErrors && peer->helloLocal;
  }
}

void UcxTransport::start(Doorbell* doorbell) {
  doorbell_ = doorbell;
  thread_ = std::thread([this] { progressLoop(); });
}

SendChannel& UcxTransport::send(int peer, int channel) {
  return *sends_[static_cast<size_t>(peer) * config_.channels + channel];
}

RecvChannel& UcxTransport::recv(int peer, int channel) {
  return *recvs_[static_cast<size_t>(peer) * config_.channels + channel];
}

bool UcxTransport::peerAlive(int peer) {
  PeerState* state = peers_[peer].get();
  if (state == nullptr) return true;
  if (!state->alive.load(std::memory_order_acquire)) return false;
  // Peers on this host use UCP_ERR_HANDLING_MODE_NONE (UCX's shared memory transports cannot
  // report failures): the kernel says whether the process is gone.
  if (state->checkPid && processGone(static_cast<uint64_t>(state->pid), pidNamespace_)) {
    drainWorker();
    state->alive.store(false, std::memory_order_release);
    return false;
  }
  return true;
}

void UcxTransport::drainWorker() {
  // A peer that is gone may have sent its last messages just before (it finished and left): they
  // can still sit inside UCX (a shared memory FIFO, a socket buffer) not yet matched to a
  // receive. Progress until the worker is quiet, so they count as arrived before the peer is
  // reported gone. Bounded: a few idle calls in a row, or kDrainSeconds.
  constexpr double kDrainSeconds = 0.1;
  constexpr int kQuietCalls = 8;
  userWaiting_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(workerMutex_);
  userWaiting_.fetch_sub(1, std::memory_order_relaxed);
  const Deadline until = Deadline::after(kDrainSeconds);
  for (int quiet = 0; quiet < kQuietCalls && !until.expired();) {
    quiet = ucp_worker_progress(worker_) != 0 ? 0 : quiet + 1;
  }
  userTouched_.store(true, std::memory_order_relaxed);
}

void UcxTransport::wakeProgress() { wake_.wake(); }

void UcxTransport::flushSoon(PeerState& peer, int channel) {
  // The progress thread holds the mutex only for one bounded batch of progress calls, so waiting
  // for it is short; leaving the work to it instead costs a thread switch per message, and on a
  // busy machine a thread that just spun is often not scheduled again for milliseconds.
  // userWaiting_ makes a spinning progress thread stand back (std::mutex is not fair).
  userWaiting_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(workerMutex_);
  userWaiting_.fetch_sub(1, std::memory_order_relaxed);
  if (flushChannel(peer, channel)) userTouched_.store(true, std::memory_order_relaxed);
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
  std::unique_lock<std::mutex> lock(workerMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  auto start = Clock::now();
  unsigned events = ucp_worker_progress(worker_);
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

void UcxTransport::signalAbort(const std::string& reason) {
  aborts_.requestOwn(reason);
  wake_.kick();
}

std::optional<std::pair<int, std::string>> UcxTransport::peerAbort() { return aborts_.peer(); }

void UcxTransport::recordAbort(int peer, const std::string& reason) {
  aborts_.recordPeer(peer, reason);
}

void UcxTransport::onHello(int from, const char* data, size_t bytes) {
  const int rank = config_.rank;
  auto reject = [&](const std::string& why) {
    BRAID_WARN("rank {}: ucx: ignoring a hello claiming to be from rank {}: {}", rank, from, why);
  };
  std::string why;
  std::optional<HelloPayload> payload = decodeHello(data, bytes, config_.size, rank, &why);
  if (!payload) return reject(why);
  if (payload->jobId != config_.jobId || payload->secret != config_.secret) {
    return reject("wrong job id or secret");
  }
  const Hello& hello = payload->hello;
  PeerState& peer = *peers_[from];
  if (peer.helloSeen) return;
  peer.helloSeen = true;
  peer.pid = static_cast<int64_t>(hello.pid);
  peer.helloLocal = hello.hostId == hostId_ && hello.pidNamespace == pidNamespace_ &&
                    pidNamespace_ != 0 && static_cast<pid_t>(hello.pid) != getpid();
}

}  // namespace braid::transport::ucx
