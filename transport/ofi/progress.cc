// The ofi completion queue and the progress thread: completions of sends, receives and control
// messages, queue errors mapped to the peer they concern (naming operation and bytes), issuing
// posted slots, re-posting released receives, credits, aborts, heartbeats and the silence check;
// the sleep on the queue's wait fd; the teardown (sends completed, bounded, then everything
// closed).
#include <poll.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "common/log.h"
#include "transport/ofi/channels.h"
#include "transport/ofi/libfabric.h"
#include "transport/ofi/ofi.h"

namespace braid::transport::ofi {

namespace {

constexpr double kDrainSeconds = 1;  // teardown: given up after this long without a send done
constexpr int kBatch = 16;                            // completions read per fi_cq_read

template <class T>
void closeFid(T*& object) {
  if (object != nullptr) fi_close(&object->fid);
  object = nullptr;
}

}  // namespace

bool OfiTransport::test(int rounds) {
  bool did = false;
  fi_cq_tagged_entry entries[kBatch];
  for (int r = 0; r < rounds; ++r) {
    ssize_t n = fi_cq_read(cq_, entries, kBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if ((entries[i].flags & FI_REMOTE_CQ_DATA) != 0) {
          onRemoteWrite(entries[i].data);  // no context: nothing of ours was posted for it
        } else {
          onCompletion(*static_cast<OpContext*>(entries[i].op_context), entries[i].len);
        }
      }
      did = true;
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      if (fi_cq_readerr(cq_, &error, 0) > 0) onError(error);
      did = true;
    } else {
      if (n != -FI_EAGAIN) {
        BRAID_WARN("rank {}: ofi: fi_cq_read failed: {}", config_.rank, fiError(static_cast<int>(-n)));
      }
      break;
    }
  }
  return did;
}

void OfiTransport::onCompletion(OpContext& op, size_t length) {
  switch (op.op) {
    case OpContext::kSend:
      sent(static_cast<OfiSendChannel*>(op.owner)->slots_[op.index]);
      return;
    case OpContext::kRecv: {
      auto& channel = *static_cast<OfiRecvChannel*>(op.owner);
      channel.slots_[op.index].posted = false;
      onArrived(channel, op.index, length);
      return;
    }
    case OpContext::kControlSend:
      control_->sendPeers[op.index] = nullptr;
      control_->freeSends.push_back(op.index);
      return;
    case OpContext::kControlRecv:
      onControl(control_->recvBuffer(op.index), length);
      postControlRecv(op.index);
      return;
  }
}

void OfiTransport::onRemoteWrite(uint64_t data) {
  const uint64_t slots = static_cast<uint64_t>(config_.slots);
  const uint64_t channels = static_cast<uint64_t>(config_.channels);
  const uint64_t slot = data % slots, channel = data / slots % channels,
                 sender = data / slots / channels;
  if (sender >= static_cast<uint64_t>(config_.size) || !peers_[sender]) {
    BRAID_WARN("rank {}: ofi: ignoring a remote write with immediate {:#x} (no such ofi peer)",
               config_.rank, data);
    return;
  }
  onWritten(*peers_[sender], static_cast<uint32_t>(channel), static_cast<uint32_t>(slot));
}

void OfiTransport::onError(const fi_cq_err_entry& error) {
  const bool canceled = error.err == FI_ECANCELED;
  char detail[256] = {};
  const char* text = fi_cq_strerror(cq_, error.prov_errno, error.err_data, detail, sizeof detail);
  const std::string why = fmt::format("{} ({})", fiError(error.err), text ? text : "");
  if (error.op_context == nullptr) {  // a peer's remote write into our memory failed here
    BRAID_WARN("rank {}: ofi: a completion error without an operation of ours: {}", config_.rank,
               why);
    return;
  }
  auto& op = *static_cast<OpContext*>(error.op_context);
  switch (op.op) {
    case OpContext::kSend: {
      auto& channel = *static_cast<OfiSendChannel*>(op.owner);
      channel.slots_[op.index].busy.store(0, std::memory_order_release);
      const auto* header = reinterpret_cast<const SlotHeader*>(channel.slot(op.index));
      if (!canceled) {
        markDead(*channel.peerState_,
                 fmt::format("{} {} bytes on channel {} failed: {}",
                             useRma_ ? "writing (fi_writedata)" : "sending (fi_tsend)",
                             header->bytes, channel.channel_, why),
                 false);
      }
      ringDoorbellIfSleeping();
      return;
    }
    case OpContext::kRecv: {
      auto& channel = *static_cast<OfiRecvChannel*>(op.owner);
      channel.slots_[op.index].posted = false;
      if (!canceled) {
        markDead(*channel.peerState_,
                 fmt::format("receiving into channel {} slot {} ({} bytes) failed: {}",
                             channel.channel_, op.index, kSlotHeaderBytes + channel.slotBytes_,
                             why),
                 error.err == FI_ETRUNC);
      }
      return;
    }
    case OpContext::kControlSend: {
      PeerState* peer = std::exchange(control_->sendPeers[op.index], nullptr);
      control_->freeSends.push_back(op.index);
      if (peer != nullptr && !canceled) {
        markDead(*peer, fmt::format("sending a control message failed: {}", why), false);
      }
      return;
    }
    case OpContext::kControlRecv:
      if (canceled) return;
      BRAID_WARN("rank {}: ofi: a control receive ({} bytes) for peer rank {} failed: {}",
                 config_.rank, kControlBytes, control_->recvPeers[op.index], why);
      postControlRecv(op.index);
      return;
  }
}

void OfiTransport::onControl(const char* data, size_t length) {
  const int rank = config_.rank;
  std::string why;
  std::optional<ControlHeader> decoded =
      decodeControlHeader(data, std::min(length, sizeof(ControlHeader)), config_.size, &why);
  if (decoded && !peers_[decoded->rank]) {
    why = fmt::format("a control message from rank {}, not an ofi peer", decoded->rank);
    decoded.reset();
  }
  if (!decoded) {
    BRAID_WARN("rank {}: ofi: ignoring {}", rank, why);
    return;
  }
  const ControlHeader& h = *decoded;
  PeerState& peer = *peers_[h.rank];
  const char* payload = data + sizeof(ControlHeader);
  const size_t bytes = length - sizeof(ControlHeader);
  if (takeControl(peer, h, payload, bytes)) return;  // hello, credit, abort, heartbeat
  switch (h.type) {
    case kRegion: {
      uint64_t address = 0;
      if (h.channel >= static_cast<uint32_t>(config_.channels) || bytes != sizeof address ||
          !useRma_) {
        markDead(peer,
                 fmt::format("a region message for channel {} with {} bytes{}", h.channel, bytes,
                             useRma_ ? "" : " on the tagged path"),
                 true);
        return;
      }
      std::memcpy(&address, payload, sizeof address);
      PeerState::Region& region = peer.regions[h.channel];
      if (!region.known) ++peer.regionsKnown;
      region = {address, h.value, true};
      return;
    }
    default:
      markDead(peer, fmt::format("unknown control message type {}", h.type), true);
  }
}

net::Issue OfiTransport::irecv(OfiRecvChannel& channel, uint32_t index) {
  RecvSlot& slot = channel.slots_[index];
  if (slot.posted) return net::Issue::kDone;  // the RMA path: the peer writes the slot
  slot.done = false;
  slot.context.op = OpContext::kRecv;
  slot.context.owner = &channel;
  slot.context.index = index;
  const size_t bytes = kSlotHeaderBytes + channel.slotBytes_;
  ssize_t rc = fi_trecv(ep_, channel.slot(index), bytes, channel.desc_, FI_ADDR_UNSPEC,
                        dataTag(channel.peerState_->rank, channel.channel_, static_cast<int>(index)),
                        0, &slot.context);
  if (rc == -FI_EAGAIN) return net::Issue::kNotNow;  // the provider needs its queue driven first
  if (rc == 0) {
    slot.posted = true;
  } else {
    markDead(*channel.peerState_,
             fmt::format("posting a receive of {} bytes on channel {} failed: {}", bytes,
                         channel.channel_, fiError(static_cast<int>(-rc))),
             false);
  }
  return net::Issue::kDone;
}

bool OfiTransport::postControlRecv(uint32_t index) {
  // The exact tag of one sender, no ignore mask: libfabric 1.17's shm provider matches a posted
  // receive against its unexpected messages with the ignore mask left in the unexpected entry by
  // that entry's previous use (smr_match_tagged), not with the receive's, so a receive for any
  // sender (ignore = the rank bits) never matched a control message that had arrived before it,
  // and the credit in it was lost (4 ranks stalled; wire.h).
  const int from = control_->recvPeers[index];
  ssize_t rc = fi_trecv(ep_, control_->recvBuffer(index), kControlBytes, control_->desc,
                        FI_ADDR_UNSPEC, controlTag(from), 0, &control_->recvContexts[index]);
  if (rc == -FI_EAGAIN) {
    control_->unposted.push_back(index);  // the provider needs its queue driven first
  } else if (rc != 0) {
    BRAID_WARN("rank {}: ofi: posting a control receive ({} bytes) for peer rank {} failed: {}",
               config_.rank, kControlBytes, from, fiError(static_cast<int>(-rc)));
  }
  return rc == 0;
}

net::Issue OfiTransport::isend(OfiSendChannel& channel, uint64_t n) {
  const uint32_t index = static_cast<uint32_t>(n % channel.k_);
  SendSlot& slot = channel.slots_[index];
  PeerState& peer = *channel.peerState_;
  slot.context.op = OpContext::kSend;
  slot.context.owner = &channel;
  slot.context.index = index;
  auto* header = reinterpret_cast<SlotHeader*>(channel.slot(n));
  const size_t bytes = kSlotHeaderBytes + header->bytes;
  slot.busy.store(1, std::memory_order_relaxed);
  ssize_t rc;
  if (useRma_) {
    // Into the peer's slot `index` directly; the immediate tells it which slot filled.
    const PeerState::Region& region = peer.regions[channel.channel_];
    rc = fi_writedata(ep_, header, bytes, channel.desc_,
                      slotImmediate(config_.rank, channel.channel_, static_cast<int>(index),
                                    config_.channels, config_.slots),
                      peer.address, region.address + index * channel.stride_, region.key,
                      &slot.context);
  } else {
    rc = fi_tsend(ep_, header, bytes, channel.desc_, peer.address,
                  dataTag(config_.rank, channel.channel_, static_cast<int>(index)), &slot.context);
  }
  if (rc == 0) {
    peer.lastSent = Clock::now();
    return net::Issue::kDone;
  }
  slot.busy.store(0, std::memory_order_release);
  if (rc == -FI_EAGAIN) return net::Issue::kNotNow;  // the provider needs its queue driven first
  markDead(peer,
           fmt::format("{} {} bytes on channel {} failed: {}",
                       useRma_ ? "writing (fi_writedata)" : "sending (fi_tsend)", header->bytes,
                       channel.channel_, fiError(static_cast<int>(-rc))),
           false);
  return net::Issue::kDone;
}

net::Issue OfiTransport::credit(PeerState& peer, int channel, uint64_t count) {
  sendControl(peer, kCredit, static_cast<uint32_t>(channel), count, {});
  return net::Issue::kDone;  // queued: issued as soon as a buffer is free (flushNet)
}

net::Issue OfiTransport::control(PeerState& peer, ControlType type, const std::string& payload) {
  sendControl(peer, type, 0, 0, payload);
  return net::Issue::kDone;
}

void OfiTransport::sendControl(PeerState& peer, uint32_t type, uint32_t channel, uint64_t value,
                               const std::string& payload) {
  ControlHeader header;
  header.type = type;
  header.rank = config_.rank;
  header.channel = channel;
  header.value = value;
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  bytes += payload;
  control_->queued.push_back({&peer, std::move(bytes)});
  flushNet();
}

bool OfiTransport::flushNet() {
  bool did = false;
  ControlPool& pool = *control_;
  for (std::vector<uint32_t> retry = std::exchange(pool.unposted, {}); uint32_t index : retry) {
    did |= postControlRecv(index);
  }
  while (!pool.queued.empty() && !pool.freeSends.empty()) {
    ControlPool::Queued& next = pool.queued.front();
    PeerState& peer = *next.peer;
    if (!peer.alive.load(std::memory_order_relaxed)) {
      pool.queued.pop_front();
      continue;
    }
    const uint32_t index = pool.freeSends.back();
    std::memcpy(pool.sendBuffer(index), next.bytes.data(), next.bytes.size());
    ssize_t rc = fi_tsend(ep_, pool.sendBuffer(index), next.bytes.size(), pool.desc, peer.address,
                          controlTag(config_.rank), &pool.sendContexts[index]);
    if (rc == -FI_EAGAIN) break;
    const size_t size = next.bytes.size();
    pool.queued.pop_front();
    did = true;
    if (rc == 0) {
      pool.freeSends.pop_back();
      pool.sendPeers[index] = &peer;
      peer.lastSent = Clock::now();
    } else {
      markDead(peer,
               fmt::format("sending a control message of {} bytes failed: {}", size,
                           fiError(static_cast<int>(-rc))),
               false);
    }
  }
  return did;
}

bool OfiTransport::netPending() const {
  return (!control_->queued.empty() && !control_->freeSends.empty()) ||
         !control_->unposted.empty();
}

void OfiTransport::sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) {
  if (cqFd_ >= 0) {
    fid* fids[1] = {&cq_->fid};
    const int ready = fi_trywait(fabric_, fids, 1);  // FI_SUCCESS: nothing pending, fd armed
    lock.unlock();
    if (ready != FI_SUCCESS) return;
    pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {cqFd_, POLLIN, 0}};
    if (poll(fds, 2, timeoutMillis) > 0 && (fds[0].revents & POLLIN)) wake_.drain();
    return;
  }
  // No wait fd: the queue is read again after at most 1 ms.
  lock.unlock();
  pollfd fd = {wake_.fd(), POLLIN, 0};
  if (poll(&fd, 1, std::min(timeoutMillis, 1)) > 0) wake_.drain();
}

size_t OfiTransport::sendsInFlight() const {
  size_t busy = control_ ? control_->sendCount - control_->freeSends.size() : 0;
  for (const auto& sc : sends_) {
    if (!sc) continue;
    for (uint64_t s = 0; s < sc->k_; ++s) busy += sc->slots_[s].busy.load(std::memory_order_relaxed);
    if (sc->peerState_->alive.load(std::memory_order_relaxed)) {
      busy += sc->posted_.load(std::memory_order_relaxed) - sc->issued_;
    }
  }
  return busy;
}

void OfiTransport::cleanup() {
  awaitSends(kDrainSeconds);
  closeFid(ep_);  // cancels what is still posted; the buffers outlive it
  closeFid(av_);
  closeFid(cq_);
  for (fid_mr*& mr : mrs_) closeFid(mr);
  mrs_.clear();
  closeFid(domain_);
  closeFid(fabric_);
  wake_.close();
}

}  // namespace braid::transport::ofi
