// The ucx connection phase: an endpoint per ucx peer (error mode by where the peer runs, from the
// address it published), then a hello (job id, secret, pid, host id) each way, progressing the
// worker on the calling thread until every peer's hello arrived or the deadline passes. A hello
// with the wrong job id or secret is ignored with one warning.
#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/ucx/libucx.h"
#include "transport/ucx/channels.h"
#include "transport/ucx/ucx.h"

namespace braid::transport::ucx {

namespace {

void endpointErrorCallback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<PeerState*>(arg);
  peer->owner->onEndpointError(*peer, status);
}

}  // namespace

void UcxTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
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
    ucs_status_t status = ucx().ucp_ep_create(worker_, &params, &peer->ep);
    if (status != UCS_OK) {
      peer->ep = nullptr;
      fail(ErrorCode::kSystemError,
           "rank {}: ucx: creating the endpoint to peer rank {} failed: {} (UCX_TLS={})", rank,
           peer->rank, ucx().ucs_status_string(status), tls_.empty() ? "unset" : tls_);
    }
    sendHello(*peer);
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
      if (!peer->hello.seen) missing += (missing.empty() ? "" : ", ") + std::to_string(peer->rank);
    }
    if (missing.empty()) break;
    if (deadline.expired()) {
      fail(ErrorCode::kTimeout,
           "rank {}: ucx connect timed out waiting for the hello of peer rank(s) {} (UCX_TLS={})",
           rank, missing, tls_.empty() ? "unset" : tls_);
    }
    if (ucx().ucp_worker_progress(worker_) == 0) {
      pollWorker(ucx().ucp_worker_arm(worker_), std::min(deadline.millisLeft(), 10));
    }
  }
  for (auto& peer : peers_) {
    if (peer) peer->checkPid = !peer->peerErrors && peer->hello.local;
  }
}

}  // namespace braid::transport::ucx
