// The verbs connection phase, net.h's connect and accept per peer (ChannelEndpoint::connectPeers
// drives them, by its deadline): every verbs peer published, under "<jobId>/verbs/<peer>/<rank>",
// its queue pair numbers, first packet sequence number, LID/GID, port MTU and where its receive
// slots and control block for this rank are (wire.h). connect moves each of this rank's queue
// pairs to it INIT -> RTR (its numbers, the smaller MTU, its GID on RoCE) -> RTS
// (BRAID_VERBS_TIMEOUT, BRAID_VERBS_RETRY) and sets "<jobId>/verbs/<rank>/<peer>/ready": the
// receive direction is up (accept). The send direction is up once the peer's ready key is set, so
// neither side writes before the other's queue pairs can take it.
#include <cstring>
#include <string>

#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/process.h"
#include "transport/verbs/calls.h"
#include "transport/verbs/channels.h"
#include "transport/verbs/verbs.h"

namespace braid::transport::verbs {

std::string VerbsTransport::handleKey(const PeerState& peer) const {
  return fmt::format("{}/verbs/{}/{}", config_.jobId, peer.rank, config_.rank);
}

net::Issue VerbsTransport::connect(PeerState& peer, const std::string& value, KeyValue& kv) {
  const int rank = config_.rank;
  if (!peer.queuePairsUp) {
    PeerAddress expect;
    expect.qps = static_cast<uint32_t>(settings_.qps);
    expect.channels = static_cast<uint32_t>(config_.channels);
    expect.slots = static_cast<uint32_t>(config_.slots);
    expect.slotStride = (kSlotHeaderBytes + config_.slotBytes + 63) / 64 * 64;
    std::string why;
    std::optional<Published> theirs = decodePublished(value, expect, &why);
    BRAID_ENFORCE(theirs.has_value(), ErrorCode::kInvalidUsage,
                  "rank {}: verbs: peer rank {} published an address this rank cannot use under "
                  "'{}': {}",
                  rank, peer.rank, handleKey(peer), why);
    BRAID_ENFORCE((theirs->address.ethernet != 0) == device_.ethernet, ErrorCode::kInvalidUsage,
                  "rank {}: verbs: peer rank {} is on {}, this rank on {} (device {})", rank,
                  peer.rank, theirs->address.ethernet ? "RoCE" : "InfiniBand",
                  device_.ethernet ? "RoCE" : "InfiniBand", device_.name);
    peer.theirs = std::move(*theirs);
    peer.hello.seen = true;
    peer.hello.pid = static_cast<int64_t>(peer.theirs.address.pid);
    peer.hello.local = peer.theirs.address.hostId == hostId_ &&
                       peer.theirs.address.pidNamespace == pidNamespace_ &&
                       peer.theirs.address.pid != static_cast<uint64_t>(getpid());
    connectQueuePairs(peer, peer.theirs);
    peer.queuePairsUp = true;
    kv.set(readyKey(rank, peer.rank), "1");
  }
  // Writes go only once the peer's queue pairs can take them.
  return probePeerKey(kv, readyKey(peer.rank, rank), rank, peer.rank, "verbs",
                      "bring its queue pairs up")
             ? net::Issue::kDone
             : net::Issue::kNotNow;
}

net::Issue VerbsTransport::accept(PeerState& peer) {
  return peer.queuePairsUp ? net::Issue::kDone : net::Issue::kNotNow;
}

std::string VerbsTransport::awaiting(const PeerState& peer, bool) const {
  if (!peer.queuePairsUp) return "its queue pairs";
  return fmt::format("its queue pairs ready (key '{}')", readyKey(peer.rank, config_.rank));
}

std::string VerbsTransport::connectContext() const {
  return fmt::format("device {}", device_.name);
}

std::string VerbsTransport::readyKey(int from, int to) const {
  return fmt::format("{}/verbs/{}/{}/ready", config_.jobId, from, to);
}

void VerbsTransport::connectQueuePairs(PeerState& peer, const Published& theirs) {
  const int rank = config_.rank;
  const PeerAddress& a = theirs.address;
  for (QueuePair& qp : peer.qps) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = std::min(device_.mtu, static_cast<ibv_mtu>(a.mtu));
    attr.dest_qp_num = theirs.qpns[qp.index];
    attr.rq_psn = a.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 1;  // 0.01 ms: receives are re-posted at once, an RNR is rare and short
    attr.ah_attr.port_num = static_cast<uint8_t>(device_.port);
    attr.ah_attr.dlid = a.lid;
    if (device_.gidIndex >= 0) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, a.gid, sizeof a.gid);
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gidIndex);
      attr.ah_attr.grh.hop_limit = 64;
    }
    if (int rc = verbsCalls().modify_qp(qp.qp, &attr,
                                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                            IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        rc != 0) {
      fail(ErrorCode::kSystemError,
           "rank {}: verbs: queue pair {} to peer rank {} -> RTR (its qpn {:#x}, {} {}) failed: {} "
           "(device {})",
           rank, qp.index, peer.rank, attr.dest_qp_num, device_.ethernet ? "GID" : "LID",
           device_.ethernet ? gidText(attr.ah_attr.grh.dgid) : std::to_string(a.lid),
           std::strerror(rc), device_.name);
    }
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = psn_;
    attr.timeout = static_cast<uint8_t>(settings_.timeout);
    attr.retry_cnt = static_cast<uint8_t>(settings_.retry);
    attr.rnr_retry = 7;  // receives always come back: retry an RNR without limit
    attr.max_rd_atomic = 1;
    if (int rc = verbsCalls().modify_qp(qp.qp, &attr,
                                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                            IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                            IBV_QP_MAX_QP_RD_ATOMIC);
        rc != 0) {
      fail(ErrorCode::kSystemError,
           "rank {}: verbs: queue pair {} to peer rank {} -> RTS failed: {} (device {})", rank,
           qp.index, peer.rank, std::strerror(rc), device_.name);
    }
  }
}

}  // namespace braid::transport::verbs
