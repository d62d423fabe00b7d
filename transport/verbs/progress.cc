// The verbs completion queue and the progress thread: writes that landed here (their immediates:
// a slot filled, a credit, an abort, a heartbeat), this rank's writes completed, IBV_WC_* errors
// mapped to the peer they concern (naming operation, channel and bytes); issuing posted slots as
// chunked writes, credits, aborts, heartbeats and the silence check; the sleep on the completion
// channel; the teardown (writes completed, bounded, then everything destroyed).
#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "transport/verbs/channels.h"
#include "transport/verbs/verbs.h"

namespace braid::transport::verbs {

namespace {

constexpr double kDrainSeconds = 1;  // teardown: a step without progress
constexpr int kBatch = 16;    // completions per ibv_poll_cq

/// What an IBV_WC_* status means for braid, in a few words.
const char* statusHint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return "no acknowledgement within BRAID_VERBS_TIMEOUT x BRAID_VERBS_RETRY: the peer is gone "
             "or unreachable";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused the write (key or address): its slots are gone or it disagrees";
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
      return "the peer could not complete it";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR:
      return "a local registration or length error";
    case IBV_WC_WR_FLUSH_ERR:
      return "flushed: the queue pair had failed before";
    default:
      return "";
  }
}

// A word the peer's NIC writes (a credit count, the abort's length): one aligned 8-byte load, as
// the NIC may be writing the next value meanwhile (counts only grow).
uint64_t loadWord(const char* at) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(at), __ATOMIC_RELAXED);
}

}  // namespace

std::string VerbsTransport::opText(const PeerState& peer, const char* op, size_t bytes,
                                   int channel) const {
  return channel >= 0 ? fmt::format("{} of {} bytes on channel {} to peer rank {}", op, bytes,
                                    channel, peer.rank)
                      : fmt::format("{} of {} bytes to peer rank {}", op, bytes, peer.rank);
}

bool VerbsTransport::test(int rounds) {
  bool did = false;
  ibv_wc wc[kBatch];
  for (int r = 0; r < rounds; ++r) {
    const int n = verbsCalls().poll_cq(cq_, kBatch, wc);
    if (n < 0) {
      BRAID_WARN("rank {}: verbs: ibv_poll_cq failed ({})", config_.rank, n);
      break;
    }
    for (int i = 0; i < n; ++i) onCompletion(wc[i]);
    if (n == 0) break;
    did = true;
  }
  return did;
}

void VerbsTransport::onCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) return onError(wc);
  switch (wrTag(wc.wr_id)) {
    case kWrData: {
      auto& slot = *reinterpret_cast<SendSlot*>(wc.wr_id);
      slot.qp->outstanding -= slot.entries;
      sent(slot);
      return;
    }
    case kWrControl:
      --peers_[wrPeer(wc.wr_id)]->qps[wrQp(wc.wr_id)].outstanding;
      return;
    case kWrChunk:
      return;
    case kWrReceive: {
      PeerState& peer = *peers_[wrPeer(wc.wr_id)];
      postReceive(peer.qps[wrQp(wc.wr_id)]);
      peer.lastHeard = Clock::now();
      const uint32_t imm = ntohl(wc.imm_data);
      if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
        markDead(peer,
                 fmt::format("a completion without an immediate (opcode {})",
                             static_cast<int>(wc.opcode)),
                 true);
      } else if ((imm & kControlImm) != 0) {
        onControlWrite(peer, imm);
      } else {
        onDataWrite(peer, imm);
      }
      return;
    }
  }
}

void VerbsTransport::onDataWrite(PeerState& peer, uint32_t imm) {
  const uint32_t slots = static_cast<uint32_t>(config_.slots);
  const uint32_t channel = imm / slots, slot = imm % slots;
  if (channel >= static_cast<uint32_t>(config_.channels)) {
    markDead(peer,
             fmt::format("a write with immediate {:#x} names channel {} of {}", imm, channel,
                         config_.channels),
             true);
    return;
  }
  onWritten(peer, channel, slot);
}

void VerbsTransport::onControlWrite(PeerState& peer, uint32_t imm) {
  const ControlBlockLayout layout(config_.channels);
  const char* in = peer.control.get();  // the in half: what the peer wrote
  const uint32_t type = (imm >> 24) & 0x7f, channel = imm & (kMaxImmChannel - 1);
  switch (type) {
    case kImmCredit:
      if (channel >= static_cast<uint32_t>(config_.channels)) break;
      onCredit(peer, channel, loadWord(in + layout.credits + 8 * channel));
      return;
    case kImmAbort: {
      const uint64_t bytes = std::min<uint64_t>(loadWord(in + layout.abortBytes), kMaxAbortReason);
      onAbort(peer, std::string(in + layout.abortText, bytes));
      return;
    }
    case kImmHeartbeat:
      return;
    default:
      break;
  }
  markDead(
      peer,
      fmt::format("a control write with immediate {:#x} (type {}, channel {})", imm, type, channel),
      true);
}

void VerbsTransport::onError(const ibv_wc& wc) {
  const bool flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
  const char* hint = statusHint(wc.status);
  const std::string status =
      fmt::format("{} ({}{}vendor error {:#x})", ibv_wc_status_str(wc.status), hint,
                  *hint ? "; " : "", wc.vendor_err);
  PeerState* peer = nullptr;
  std::string what;
  switch (wrTag(wc.wr_id)) {
    case kWrData: {
      auto& slot = *reinterpret_cast<SendSlot*>(wc.wr_id);
      slot.qp->outstanding -= slot.entries;
      slot.busy.store(0, std::memory_order_release);
      peer = slot.qp->peer;
      what =
          opText(*peer, "writing a slot (RDMA_WRITE_WITH_IMM)", slot.bytes, slot.channel->channel_);
      break;
    }
    case kWrControl:
      peer = peers_[wrPeer(wc.wr_id)].get();
      --peer->qps[wrQp(wc.wr_id)].outstanding;
      what = opText(*peer, "a control write (credit, abort or heartbeat)", 0, -1);
      break;
    case kWrReceive:
      peer = peers_[wrPeer(wc.wr_id)].get();
      what = fmt::format("a receive for writes from peer rank {}", peer->rank);
      break;
    case kWrChunk: {
      auto it = byQpn_.find(wc.qp_num);
      if (it == byQpn_.end()) return;
      peer = it->second->peer;
      what = opText(*peer, "writing a chunk (RDMA_WRITE)", settings_.chunkBytes, -1);
      break;
    }
  }
  ringDoorbellIfSleeping();
  if (flushed && !peer->alive.load(std::memory_order_relaxed)) return;  // said already
  markDead(*peer, fmt::format("{} failed: {}", what, status), false);
}

void VerbsTransport::postReceive(QueuePair& qp) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wrId(kWrReceive, qp.peer->rank, qp.index);
  wr.num_sge = 0;  // writes with an immediate consume a receive but place no data through it
  if (int rc = verbsCalls().post_recv(qp.qp, &wr, &bad); rc != 0) {
    markDead(
        *qp.peer,
        fmt::format("posting a receive on queue pair {} failed: {}", qp.index, std::strerror(rc)),
        false);
  }
}

net::Issue VerbsTransport::isend(VerbsSendChannel& channel, uint64_t n) {
  const uint32_t index = static_cast<uint32_t>(n % channel.k_);
  SendSlot& slot = channel.slots_[index];
  PeerState& peer = *channel.peerState_;
  const auto* header = reinterpret_cast<const SlotHeader*>(channel.slot(n));
  const size_t bytes = kSlotHeaderBytes + header->bytes;
  const size_t chunk = settings_.chunkBytes;
  const int entries = static_cast<int>((bytes + chunk - 1) / chunk);
  QueuePair& qp = peer.qps[static_cast<size_t>(peer.nextQp) % peer.qps.size()];
  if (qp.outstanding + entries > sendDepth_) return net::Issue::kNotNow;  // room after completions
  const SlotRegion& region = peer.theirs.regions[channel.channel_];
  const uint64_t remote = region.address + index * channel.stride_;
  const uint32_t lkey = static_cast<ibv_mr*>(channel.desc_)->lkey;
  std::vector<ibv_sge> sges(static_cast<size_t>(entries));
  std::vector<ibv_send_wr> wrs(static_cast<size_t>(entries));
  for (int e = 0; e < entries; ++e) {
    const size_t offset = static_cast<size_t>(e) * chunk;
    const bool last = e + 1 == entries;
    sges[e].addr = reinterpret_cast<uintptr_t>(header) + offset;
    sges[e].length = static_cast<uint32_t>(std::min(chunk, bytes - offset));
    sges[e].lkey = lkey;
    ibv_send_wr& wr = wrs[e];
    wr.wr_id = last ? reinterpret_cast<uintptr_t>(&slot) : wrId(kWrChunk, peer.rank, qp.index);
    wr.sg_list = &sges[e];
    wr.num_sge = 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    if (last)
      wr.imm_data = htonl(dataImmediate(channel.channel_, static_cast<int>(index), config_.slots));
    wr.wr.rdma.remote_addr = remote + offset;
    wr.wr.rdma.rkey = region.key;
    wr.next = last ? nullptr : &wrs[e + 1];
  }
  slot.bytes = bytes;
  slot.entries = entries;
  slot.qp = &qp;
  slot.busy.store(1, std::memory_order_relaxed);
  ibv_send_wr* bad = nullptr;
  if (int rc = verbsCalls().post_send(qp.qp, wrs.data(), &bad); rc != 0) {
    slot.busy.store(0, std::memory_order_release);
    if (rc == ENOMEM && bad == wrs.data()) return net::Issue::kNotNow;  // full after all: later
    markDead(peer,
             fmt::format("{} failed: ibv_post_send: {}",
                         opText(peer, "posting a slot's writes", bytes, channel.channel_),
                         std::strerror(rc)),
             false);
    return net::Issue::kDone;
  }
  qp.outstanding += entries;
  ++peer.nextQp;
  peer.lastSent = Clock::now();
  return net::Issue::kDone;
}

bool VerbsTransport::writeControl(PeerState& peer, size_t offset, size_t bytes, uint32_t imm) {
  QueuePair& qp = peer.qps[0];  // credits in order: one queue pair
  if (qp.outstanding + 1 > sendDepth_) return false;
  const ControlBlockLayout layout(config_.channels);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(peer.control.get() + layout.half + offset);
  sge.length = static_cast<uint32_t>(bytes);
  sge.lkey = peer.controlMr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wrId(kWrControl, peer.rank, 0);
  wr.sg_list = bytes > 0 ? &sge : nullptr;
  wr.num_sge = bytes > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = peer.theirs.address.controlAddress + offset;
  wr.wr.rdma.rkey = peer.theirs.address.controlKey;
  ibv_send_wr* bad = nullptr;
  if (int rc = verbsCalls().post_send(qp.qp, &wr, &bad); rc != 0) {
    if (rc == ENOMEM) return false;
    markDead(peer,
             fmt::format("{} failed: ibv_post_send: {}",
                         opText(peer, "posting a control write", bytes, -1), std::strerror(rc)),
             false);
    return true;
  }
  ++qp.outstanding;
  peer.lastSent = Clock::now();
  return true;
}

net::Issue VerbsTransport::credit(PeerState& peer, int channel, uint64_t count) {
  const ControlBlockLayout layout(config_.channels);
  const size_t offset = layout.credits + 8 * static_cast<size_t>(channel);
  std::memcpy(peer.control.get() + layout.half + offset, &count, sizeof count);
  return writeControl(peer, offset, sizeof count, controlImmediate(kImmCredit, channel))
             ? net::Issue::kDone
             : net::Issue::kNotNow;
}

net::Issue VerbsTransport::control(PeerState& peer, net::ControlType type,
                                   const std::string& payload) {
  if (type == net::kHeartbeat) {
    // Nothing written: a failed heartbeat (IBV_WC_RETRY_EXC_ERR) is how a vanished host shows.
    return writeControl(peer, 0, 0, controlImmediate(kImmHeartbeat, 0)) ? net::Issue::kDone
                                                                         : net::Issue::kNotNow;
  }
  const ControlBlockLayout layout(config_.channels);
  char* out = peer.control.get() + layout.half;
  const uint64_t bytes = std::min<uint64_t>(payload.size(), kMaxAbortReason);
  std::memcpy(out + layout.abortBytes, &bytes, sizeof bytes);
  std::memcpy(out + layout.abortText, payload.data(), bytes);
  return writeControl(peer, layout.abortBytes, layout.abortText - layout.abortBytes + bytes,
                      controlImmediate(kImmAbort, 0))
             ? net::Issue::kDone
             : net::Issue::kNotNow;
}

void VerbsTransport::sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) {
  // Arm first, then look once more: a completion between the last poll and the arm is seen by
  // this poll, one after it raises the channel's event.
  verbsCalls().req_notify_cq(cq_, 0);
  if (test(1)) {
    lock.unlock();
    return;
  }
  lock.unlock();
  pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {events_->fd, POLLIN, 0}};
  if (poll(fds, 2, timeoutMillis) <= 0) return;
  if (fds[0].revents & POLLIN) wake_.drain();
  if (fds[1].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (verbsCalls().get_cq_event(events_, &cq, &context) == 0) verbsCalls().ack_cq_events(cq, 1);
  }
}

size_t VerbsTransport::sendsInFlight() const {
  size_t busy = 0;
  for (const auto& peer : peers_) {
    if (!peer || !peer->alive.load(std::memory_order_relaxed)) continue;
    for (const QueuePair& qp : peer->qps) busy += static_cast<size_t>(qp.outstanding);
  }
  for (const auto& sc : sends_) {
    if (sc && sc->peerState_->alive.load(std::memory_order_relaxed)) {
      busy += sc->posted_.load(std::memory_order_relaxed) - sc->issued_;
    }
  }
  return busy;
}

void VerbsTransport::cleanup() {
  awaitSends(kDrainSeconds);  // a completed RC write was acknowledged: it is in the peer's memory
  for (auto& peer : peers_) {
    if (!peer) continue;
    for (QueuePair& qp : peer->qps) {
      if (qp.qp != nullptr) verbsCalls().destroy_qp(qp.qp);
      qp.qp = nullptr;
    }
  }
  if (cq_ != nullptr) verbsCalls().destroy_cq(cq_);
  cq_ = nullptr;
  if (events_ != nullptr) verbsCalls().destroy_comp_channel(events_);
  events_ = nullptr;
  for (ibv_mr* mr : mrs_) verbsCalls().dereg_mr(mr);
  mrs_.clear();
  regions_.clear();
  if (pd_ != nullptr) verbsCalls().dealloc_pd(pd_);
  pd_ = nullptr;
  if (context_ != nullptr) verbsCalls().close_device(context_);
  context_ = nullptr;
  wake_.close();
}

}  // namespace braid::transport::verbs
