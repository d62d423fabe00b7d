// The ucx progress thread and the UCX callbacks: it issues posted slots as tagged sends, re-posts
// released receives and returns credits, sends aborts, and sleeps on the worker's event fd when
// idle. Teardown closes the endpoints with a flush (bounded) and cancels the receives.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "common/log.h"
#include "transport/network/drain_budget.h"
#include "transport/ucx/libucx.h"
#include "transport/ucx/channels.h"
#include "transport/ucx/ucx.h"

namespace braid::transport::ucx {

namespace {

// Teardown: flushing and closing the endpoints, given up after this long without a send or a
// close completing (a frozen peer), and in all at most the endpoint's timeout.
constexpr double kCloseSeconds = 1;
constexpr double kCancelSeconds = 0.5;  // teardown: cancelling the pre-posted receives

void sendCallback(void* request, ucs_status_t status, void* user) {
  auto* slot = static_cast<SendSlot*>(user);
  slot->channel->owner_->onSendDone(*slot, status);
  ucx().ucp_request_free(request);
}

void recvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* slot = static_cast<RecvSlot*>(user);
  slot->request = nullptr;
  size_t length = status == UCS_OK && info != nullptr ? info->length : 0;
  ucx().ucp_request_free(request);
  slot->channel->owner_->onRecvDone(*slot, status, length);
}

void controlSendCallback(void* request, ucs_status_t status, void* user) {
  auto* message = static_cast<ControlMessage*>(user);
  message->owner->onControlDone(message, status);
  ucx().ucp_request_free(request);
}

}  // namespace

net::Issue UcxTransport::irecv(UcxRecvChannel& channel, uint32_t index) {
  RecvSlot& slot = channel.slots_[index];
  slot.done = false;
  ucp_tag_recv_info_t info{};
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO;
  param.cb.recv = recvCallback;
  param.user_data = &slot;
  param.recv_info.tag_info = &info;
  const int peer = channel.peerState_->rank;
  ucs_status_ptr_t request = ucx().ucp_tag_recv_nbx(
      worker_, channel.slot(index), kSlotHeaderBytes + channel.slotBytes_,
      dataTag(peer, channel.channel_, static_cast<int>(index)), kFullTagMask, &param);
  if (request == nullptr) {
    onRecvDone(slot, UCS_OK, info.length);
  } else if (UCS_PTR_IS_ERR(request)) {
    markDead(*channel.peerState_,
             fmt::format("posting a receive on channel {} failed: {}", channel.channel_,
                         ucx().ucs_status_string(UCS_PTR_STATUS(request))),
             false);
  } else {
    slot.request = request;
  }
  return net::Issue::kDone;
}

net::Issue UcxTransport::isend(UcxSendChannel& channel, uint64_t n) {
  SendSlot& slot = channel.slots_[n % channel.k_];
  slot.busy.store(1, std::memory_order_relaxed);
  auto* header = reinterpret_cast<SlotHeader*>(channel.slot(n));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = sendCallback;
  param.user_data = &slot;
  ucs_status_ptr_t request = ucx().ucp_tag_send_nbx(
      channel.peerState_->ep, header, kSlotHeaderBytes + header->bytes,
      dataTag(config_.rank, channel.channel_, static_cast<int>(n % channel.k_)), &param);
  if (request == nullptr) {
    slot.busy.store(0, std::memory_order_release);
  } else if (UCS_PTR_IS_ERR(request)) {
    slot.busy.store(0, std::memory_order_release);
    markDead(*channel.peerState_,
             fmt::format("sending {} bytes on channel {} failed: {}", header->bytes,
                         channel.channel_, ucx().ucs_status_string(UCS_PTR_STATUS(request))),
             false);
  }
  return net::Issue::kDone;  // UCX takes every send (it queues what it cannot send yet)
}

net::Issue UcxTransport::credit(PeerState& peer, int channel, uint64_t count) {
  sendControl(peer, kCredit, static_cast<uint32_t>(channel), count, {});
  return net::Issue::kDone;
}

net::Issue UcxTransport::control(PeerState& peer, ControlType type, const std::string& payload) {
  sendControl(peer, type, 0, 0, payload);
  return net::Issue::kDone;
}

void UcxTransport::sendControl(PeerState& peer, uint32_t type, uint32_t channel, uint64_t value,
                               std::string payload) {
  if (peer.ep == nullptr) return;
  auto* message = new ControlMessage;
  message->owner = this;
  message->peer = &peer;
  message->header.type = type;
  message->header.rank = config_.rank;
  message->header.channel = channel;
  message->header.value = value;
  message->payload = std::move(payload);
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  param.cb.send = controlSendCallback;
  param.user_data = message;
  ucs_status_ptr_t request =
      ucx().ucp_am_send_nbx(peer.ep, kAmControl, &message->header, sizeof message->header,
                      message->payload.data(), message->payload.size(), &param);
  if (request == nullptr) {
    delete message;
  } else if (UCS_PTR_IS_ERR(request)) {
    delete message;
    markDead(peer,
             fmt::format("sending a control message failed: {}",
                         ucx().ucs_status_string(UCS_PTR_STATUS(request))),
             false);
  } else {
    control_.insert(message);
  }
}

void UcxTransport::onSendDone(SendSlot& slot, ucs_status_t status) {
  if (status != UCS_OK && status != UCS_ERR_CANCELED) {
    markDead(*slot.channel->peerState_,
             fmt::format("a send on channel {} failed: {}", slot.channel->channel_,
                         ucx().ucs_status_string(status)),
             false);
  }
  sent(slot);
}

void UcxTransport::onRecvDone(RecvSlot& slot, ucs_status_t status, size_t length) {
  if (status == UCS_ERR_CANCELED) return;
  UcxRecvChannel& channel = *slot.channel;
  PeerState& peer = *channel.peerState_;
  if (status != UCS_OK) {
    markDead(peer,
             fmt::format("a receive on channel {} failed: {}", channel.channel_,
                         ucx().ucs_status_string(status)),
             status == UCS_ERR_MESSAGE_TRUNCATED);
    return;
  }
  onArrived(channel, slot.index, length);
}

void UcxTransport::onControlDone(ControlMessage* message, ucs_status_t status) {
  control_.erase(message);
  if (status != UCS_OK && status != UCS_ERR_CANCELED) {
    markDead(*message->peer, fmt::format("a control message failed: {}", ucx().ucs_status_string(status)),
             false);
  }
  delete message;
}

void UcxTransport::onEndpointError(PeerState& peer, ucs_status_t status) {
  markDead(peer, fmt::format("UCX reported the endpoint failed: {}", ucx().ucs_status_string(status)),
           false);
}

void UcxTransport::onControl(const void* header, size_t headerBytes, const void* data, size_t bytes,
                             const ucp_am_recv_param_t* param) {
  const int rank = config_.rank;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    // Our control messages are always eager; a rendezvous one is not ours.
    ucx().ucp_am_data_release(worker_, const_cast<void*>(data));
    BRAID_WARN("rank {}: ucx: ignoring a {}-byte rendezvous active message", rank, bytes);
    return;
  }
  std::string why;
  std::optional<ControlHeader> decoded =
      decodeControlHeader(header, headerBytes, config_.size, &why);
  if (decoded && !peers_[decoded->rank]) {
    why = fmt::format("an active message (magic {:#x}, rank {})", decoded->magic, decoded->rank);
    decoded.reset();
  }
  if (!decoded) {
    BRAID_WARN("rank {}: ucx: ignoring {}", rank, why);
    return;
  }
  const ControlHeader& h = *decoded;
  PeerState& peer = *peers_[h.rank];
  const char* text = static_cast<const char*>(data);
  if (!takeControl(peer, h, text, bytes)) {  // hello, credit, abort, heartbeat
    markDead(peer, fmt::format("unknown control message type {}", h.type), true);
  }
}

bool UcxTransport::test(int rounds) {
  bool did = false;
  for (int i = 0; i < 16 * rounds && ucx().ucp_worker_progress(worker_) != 0; ++i) did = true;
  return did;
}

void UcxTransport::sleepOnQueue(int timeoutMillis, std::unique_lock<std::mutex>& lock) {
  // A user thread drove the worker since our last progress: progress again, do not arm.
  if (userTouched_.exchange(false, std::memory_order_relaxed)) return;
  const ucs_status_t status = ucx().ucp_worker_arm(worker_);
  lock.unlock();
  pollWorker(status, timeoutMillis);
}

void UcxTransport::pollWorker(ucs_status_t armed, int timeoutMillis) {
  // UCS_ERR_BUSY: events are pending, progress again instead of sleeping.
  if (armed == UCS_ERR_BUSY) return;
  pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {workerFd_, POLLIN, 0}};
  // Without a working event fd, sleep in short steps instead.
  int n = poll(fds, armed == UCS_OK ? 2 : 1, armed == UCS_OK ? timeoutMillis : 1);
  if (n > 0 && (fds[0].revents & POLLIN)) wake_.drain();
}

size_t UcxTransport::sendsInFlight() const {
  size_t busy = 0;
  for (const auto& sc : sends_) {
    for (uint64_t s = 0; sc && s < sc->k_; ++s)
      busy += sc->slots_[s].busy.load(std::memory_order_relaxed);
  }
  return busy;
}

void UcxTransport::cleanup() {
  if (worker_ != nullptr) {
    // Endpoints first: a flush delivers what is in flight (bounded: a frozen peer never acks).
    std::vector<void*> closing;
    for (auto& peer : peers_) {
      if (!peer || peer->ep == nullptr) continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = peer->alive.load() ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucx().ucp_ep_close_nbx(peer->ep, &param);
      if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
      peer->ep = nullptr;
    }
    DrainBudget budget(kCloseSeconds, drainLimit());
    size_t inFlightBefore = SIZE_MAX;
    while (!closing.empty()) {
      ucx().ucp_worker_progress(worker_);
      closing.erase(std::remove_if(closing.begin(), closing.end(),
                                   [](void* request) {
                                     if (ucx().ucp_request_check_status(request) == UCS_INPROGRESS) {
                                       return false;
                                     }
                                     ucx().ucp_request_free(request);
                                     return true;
                                   }),
                    closing.end());
      const size_t inFlight = closing.size() + sendsInFlight();
      if (inFlight < inFlightBefore) budget.progressed();  // peers are taking data
      inFlightBefore = inFlight;
      if (budget.expired()) break;
    }
    for (void* request : closing) ucx().ucp_request_free(request);  // released once it completes
    // Then the receives still posted.
    auto pending = [&] {
      bool any = false;
      for (auto& rc : recvs_) {
        for (uint64_t s = 0; rc && s < rc->k_; ++s) any |= rc->slots_[s].request != nullptr;
      }
      return any;
    };
    for (auto& rc : recvs_) {
      for (uint64_t s = 0; rc && s < rc->k_; ++s) {
        if (rc->slots_[s].request != nullptr) ucx().ucp_request_cancel(worker_, rc->slots_[s].request);
      }
    }
    Deadline cancelDeadline = Deadline::after(kCancelSeconds);
    while (pending() && !cancelDeadline.expired()) ucx().ucp_worker_progress(worker_);
    for (auto& rc : recvs_) {
      for (uint64_t s = 0; rc && s < rc->k_; ++s) {
        if (rc->slots_[s].request != nullptr) ucx().ucp_request_free(rc->slots_[s].request);
        rc->slots_[s].request = nullptr;
      }
    }
    ucx().ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  for (ControlMessage* message : control_) delete message;
  control_.clear();
  if (context_ != nullptr) {
    ucx().ucp_cleanup(context_);
    context_ = nullptr;
  }
  wake_.close();
}

}  // namespace braid::transport::ucx
