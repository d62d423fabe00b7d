// The ucx connection phase, net.h's connect and accept per peer (ChannelEndpoint::connectPeers
// drives them): connect makes the endpoint to the peer (error mode by where the peer runs, from
// the address it published) and sends the hello (job id, secret, pid, host id); accept is done
// once the peer's hello arrived. connectWait progresses the worker on the calling thread. A hello
// with the wrong job id or secret is ignored with one warning.
#include <unistd.h>

#include <string>

#include "common/env.h"
#include "common/log.h"
#include "transport/ucx/channels.h"
#include "transport/ucx/libucx.h"
#include "transport/ucx/ucx.h"

namespace braid::transport::ucx {

namespace {

void endpointErrorCallback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<PeerState*>(arg);
  peer->owner->onEndpointError(*peer, status);
}

}  // namespace

std::string UcxTransport::handleKey(const PeerState& peer) const {
  return fmt::format("{}/ucx/{}", config_.jobId, peer.rank);
}

net::Issue UcxTransport::connect(PeerState& peer, const std::string& hex, KeyValue&) {
  const int rank = config_.rank;
  // BRAID_UCX_ERR_MODE=peer|none overrides the choice below (auto).
  const std::string errMode = envString("BRAID_UCX_ERR_MODE").value_or("auto");
  BRAID_ENFORCE(errMode == "auto" || errMode == "peer" || errMode == "none",
                ErrorCode::kInvalidUsage,
                "rank {}: BRAID_UCX_ERR_MODE='{}': choose auto, peer or none", rank, errMode);
  std::string address;
  size_t colon1 = hex.find(':');
  size_t colon2 = colon1 == std::string::npos ? colon1 : hex.find(':', colon1 + 1);
  BRAID_ENFORCE(colon2 != std::string::npos && fromHex(hex.substr(colon2 + 1), &address),
                ErrorCode::kRemoteError,
                "rank {}: ucx: peer rank {} published a malformed worker address under '{}'", rank,
                peer.rank, handleKey(peer));
  // A peer on this host, in this pid namespace: its death is seen by the kernel (peerAlive), so
  // UCX may use shared memory, whose transports have no peer failure handling. Elsewhere UCX must
  // report failures (its transports there do).
  const bool local = hex.substr(0, colon2) == fmt::format("{:x}:{:x}", hostId_, pidNamespace_) &&
                     pidNamespace_ != 0;
  peer.peerErrors = errMode == "auto" ? !local : errMode == "peer";
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = peer.peerErrors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = endpointErrorCallback;
  params.err_handler.arg = &peer;
  ucs_status_t status = ucx().ucp_ep_create(worker_, &params, &peer.ep);
  if (status != UCS_OK) {
    peer.ep = nullptr;
    fail(ErrorCode::kSystemError,
         "rank {}: ucx: creating the endpoint to peer rank {} failed: {} ({})", rank, peer.rank,
         ucx().ucs_status_string(status), connectContext());
  }
  sendHello(peer);
  return net::Issue::kDone;
}

net::Issue UcxTransport::accept(PeerState& peer) {
  return peer.hello.seen ? net::Issue::kDone : net::Issue::kNotNow;
}

std::string UcxTransport::awaiting(const PeerState&, bool send) const {
  return send ? "its endpoint" : "its hello";
}

std::string UcxTransport::connectContext() const {
  return fmt::format("UCX_TLS={}", tls_.empty() ? "unset" : tls_);
}

void UcxTransport::connected() {
  // The kernel's word on a local peer counts only where UCX itself reports no failures.
  for (auto& peer : peers_) {
    if (peer) peer->checkPid = !peer->peerErrors && peer->hello.local;
  }
}

}  // namespace braid::transport::ucx
