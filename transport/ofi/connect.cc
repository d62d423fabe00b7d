// The ofi connection phase: every ofi peer's published address (provider, host, endpoint name)
// goes into the address vector, then a hello (job id, secret, pid, host) each way, driving the
// queue on the calling thread until every peer's hello arrived or the deadline passes. A hello
// with the wrong job id or secret is ignored with one warning; a peer on another provider is a
// usage error naming both.
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/log.h"
#include "transport/ofi/channels.h"
#include "transport/ofi/libfabric.h"
#include "transport/ofi/ofi.h"
#include "transport/peer_key.h"

namespace braid::transport::ofi {

void OfiTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& peer : peers_) {
    if (!peer) continue;
    const std::string key = fmt::format("{}/ofi/{}", config_.jobId, peer->rank);
    const std::string value =
        getPeerKey(kv, key, deadline, rank, peer->rank, "ofi", "publish its address");
    std::string why;
    std::optional<Published> published = decodePublished(value, &why);
    BRAID_ENFORCE(published.has_value(), ErrorCode::kRemoteError,
                  "rank {}: ofi: peer rank {} published a malformed address under '{}': {}", rank,
                  peer->rank, key, why);
    BRAID_ENFORCE(published->provider == provider_.name, ErrorCode::kInvalidUsage,
                  "rank {}: ofi: peer rank {} uses libfabric provider '{}', this rank '{}': set "
                  "BRAID_OFI_PROVIDER alike on every rank",
                  rank, peer->rank, published->provider, provider_.name);
    const char* path = useRma_ ? "rma" : "tagged";
    BRAID_ENFORCE(published->path == path, ErrorCode::kInvalidUsage,
                  "rank {}: ofi: peer rank {} moves data as {}, this rank as {}: set BRAID_OFI_RMA "
                  "alike on every rank",
                  rank, peer->rank, published->path, path);
    int inserted = fi_av_insert(av_, published->address.data(), 1, &peer->address, 0, nullptr);
    BRAID_ENFORCE(inserted == 1, ErrorCode::kSystemError,
                  "rank {}: ofi: inserting peer rank {}'s address ({} bytes) failed: {} "
                  "(provider {})",
                  rank, peer->rank, published->address.size(),
                  inserted < 0 ? fiError(-inserted) : "not inserted", provider_.name);
    sendHello(*peer);
    if (useRma_) sendRegions(*peer);
  }
  // Drive the queue here until every peer's hello arrived: then both directions work.
  while (true) {
    test(8);
    flushNet();
    std::string missing;
    for (auto& peer : peers_) {
      if (!peer) continue;
      if (!peer->alive.load()) {
        fail(ErrorCode::kRemoteError, "rank {}: ofi connection to peer rank {} failed (provider {})",
             rank, peer->rank, provider_.name);
      }
      const bool regions = !useRma_ || peer->regionsKnown == config_.channels;
      if (!peer->hello.seen || !regions) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(peer->rank);
      }
    }
    if (missing.empty()) break;
    if (deadline.expired()) {
      fail(ErrorCode::kTimeout,
           "rank {}: ofi connect timed out waiting for the hello of peer rank(s) {} (provider {})",
           rank, missing, provider_.name);
    }
    sleepOnQueue(std::min(deadline.millisLeft(), 10), lock);
    lock.lock();
  }
  const Clock::time_point now = Clock::now();
  for (auto& peer : peers_) {
    if (!peer) continue;
    peer->lastHeard = peer->lastSent = now;
    peer->checkPid = peer->hello.local;
  }
  connected_ = true;
}

void OfiTransport::sendRegions(PeerState& peer) {
  const bool virtualAddresses = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  for (int c = 0; c < config_.channels; ++c) {
    OfiRecvChannel& channel = *recvs_[static_cast<size_t>(peer.rank) * config_.channels + c];
    fid_mr* mr = regions_.at(channel.buffer_.get());
    // Providers that address by virtual address get slot 0's; the others an offset into the
    // registration (tcp-like: 0).
    const uint64_t address = virtualAddresses ? reinterpret_cast<uintptr_t>(channel.buffer_.get()) : 0;
    std::string payload(reinterpret_cast<const char*>(&address), sizeof address);
    sendControl(peer, kRegion, static_cast<uint32_t>(c), fi_mr_key(mr), payload);
  }
}

}  // namespace braid::transport::ofi
