// The ofi connection phase, net.h's connect and accept per peer (ChannelEndpoint::connectPeers
// drives them, reading the queue on the calling thread between rounds): connect puts the peer's
// published address (provider, data path, endpoint name) into the address vector and sends the
// hello (job id, secret, pid, host) and, on the RMA path, where the peer's writes go; accept is
// done once the peer's hello (and regions) arrived. A hello with the wrong job id or secret is
// ignored with one warning; a peer on another provider or data path is a usage error naming
// both.
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "common/log.h"
#include "transport/ofi/channels.h"
#include "transport/ofi/libfabric.h"
#include "transport/ofi/ofi.h"

namespace braid::transport::ofi {

std::string OfiTransport::handleKey(const PeerState& peer) const {
  return fmt::format("{}/ofi/{}", config_.jobId, peer.rank);
}

net::Issue OfiTransport::connect(PeerState& peer, const std::string& value, KeyValue&) {
  const int rank = config_.rank;
  std::string why;
  std::optional<Published> published = decodePublished(value, &why);
  BRAID_ENFORCE(published.has_value(), ErrorCode::kRemoteError,
                "rank {}: ofi: peer rank {} published a malformed address under '{}': {}", rank,
                peer.rank, handleKey(peer), why);
  BRAID_ENFORCE(published->provider == provider_.name, ErrorCode::kInvalidUsage,
                "rank {}: ofi: peer rank {} uses libfabric provider '{}', this rank '{}': set "
                "BRAID_OFI_PROVIDER alike on every rank",
                rank, peer.rank, published->provider, provider_.name);
  const char* path = useRma_ ? "rma" : "tagged";
  BRAID_ENFORCE(published->path == path, ErrorCode::kInvalidUsage,
                "rank {}: ofi: peer rank {} moves data as {}, this rank as {}: set BRAID_OFI_RMA "
                "alike on every rank",
                rank, peer.rank, published->path, path);
  int inserted = fi_av_insert(av_, published->address.data(), 1, &peer.address, 0, nullptr);
  BRAID_ENFORCE(inserted == 1, ErrorCode::kSystemError,
                "rank {}: ofi: inserting peer rank {}'s address ({} bytes) failed: {} "
                "(provider {})",
                rank, peer.rank, published->address.size(),
                inserted < 0 ? fiError(-inserted) : "not inserted", provider_.name);
  // Both are queued for a buffer if the pool has none now (flushNet sends them).
  sendHello(peer);
  if (useRma_) sendRegions(peer);
  return net::Issue::kDone;
}

net::Issue OfiTransport::accept(PeerState& peer) {
  const bool regions = !useRma_ || peer.regionsKnown == config_.channels;
  return peer.hello.seen && regions ? net::Issue::kDone : net::Issue::kNotNow;
}

std::string OfiTransport::awaiting(const PeerState& peer, bool send) const {
  if (send) return "its address";
  return peer.hello.seen ? "where its writes go" : "its hello";
}

std::string OfiTransport::connectContext() const {
  return fmt::format("provider {}", provider_.name);
}

void OfiTransport::sendRegions(PeerState& peer) {
  const bool virtualAddresses = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  for (int c = 0; c < config_.channels; ++c) {
    OfiRecvChannel& channel = *recvs_[static_cast<size_t>(peer.rank) * config_.channels + c];
    fid_mr* mr = regions_.at(channel.buffer_.get());
    // Providers that address by virtual address get slot 0's; the others an offset into the
    // registration (tcp-like: 0).
    const uint64_t address =
        virtualAddresses ? reinterpret_cast<uintptr_t>(channel.buffer_.get()) : 0;
    std::string payload(reinterpret_cast<const char*>(&address), sizeof address);
    sendControl(peer, kRegion, static_cast<uint32_t>(c), fi_mr_key(mr), payload);
  }
}

}  // namespace braid::transport::ofi
