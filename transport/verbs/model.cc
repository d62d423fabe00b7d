// A software model of the libibverbs calls the verbs transport makes (calls.h), for tests on
// machines without an RDMA device: device "model0" (or more: setModelDevices) with an active RoCE
// port each, reliable-connected queue pairs of this process that reach each other (ranks as
// threads), RDMA_WRITE and RDMA_WRITE_WITH_IMM done at once as memcpy into the target's
// registered memory (keys and ranges checked), a write with an immediate consuming one of the
// target's receives (waiting for one, as an RNR retry would), completions on the queues with the
// channel's eventfd raised when armed, and completions polled in a random order between queue
// pairs (each queue pair's own in order, as hardware keeps them). Errors as a NIC reports them: a
// write to a queue pair that is gone or not connected fails with IBV_WC_RETRY_EXC_ERR, a bad key
// or range with IBV_WC_REM_ACCESS_ERR / IBV_WC_LOC_PROT_ERR, and failNextModelWrites() injects
// them; a failed queue pair goes to error and flushes everything after (IBV_WC_WR_FLUSH_ERR). Not
// modelled: timing, the wire, other processes. One mutex guards it all, which also orders the
// copies before the completions.
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <unordered_set>

#include "transport/verbs/calls.h"
#include "transport/verbs/wire.h"

namespace braid::transport::verbs {

namespace {

struct ModelCq {
  ibv_cq cq{};  // first: an ibv_cq* is a ModelCq*
  std::deque<ibv_wc> entries;
  bool armed = false;
};

struct ModelQp {
  ibv_qp qp{};  // first: an ibv_qp* is a ModelQp*
  ModelCq* sendCq = nullptr;
  ModelCq* recvCq = nullptr;
  ibv_qp_state state = IBV_QPS_RESET;
  uint32_t dest = 0;
  uint32_t maxSend = 0;
  std::deque<uint64_t> receives;  // posted receives' wr_ids
  struct Pending {
    uint32_t imm;
    uint32_t bytes;
  };
  std::deque<Pending> pending;  // writes with an immediate waiting for a receive
};

struct Model {
  std::mutex mutex;
  ibv_device devices[kMaxModelDevices]{};
  ibv_device* list[kMaxModelDevices + 1] = {};
  int deviceCount = 1;
  std::map<uint32_t, ModelQp*> qps;  // by qp_num
  std::map<uint32_t, ibv_mr*> mrs;   // by key (lkey == rkey)
  std::map<ibv_comp_channel*, ModelCq*> channelCq;
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  int failWrites = 0;
  bool replaceImm = false;
  uint32_t imm = 0;
  ibv_wc_status failStatus = IBV_WC_RETRY_EXC_ERR;
  std::mt19937 random{12345};
  Model() {
    for (int d = 0; d < kMaxModelDevices; ++d) {
      std::snprintf(devices[d].name, sizeof devices[d].name, "model%d", d);
    }
    list[0] = &devices[0];
  }
};

Model& model() {
  static Model* m = new Model;  // never destroyed: threads may use it at exit
  return *m;
}

void complete(ModelCq* cq, const ibv_wc& wc) {
  cq->entries.push_back(wc);
  if (cq->armed && cq->cq.channel != nullptr) {
    cq->armed = false;
    uint64_t one = 1;
    ssize_t n = write(cq->cq.channel->fd, &one, sizeof one);
    (void)n;
  }
}

ibv_wc completion(uint64_t wrId, ibv_wc_status status, ibv_wc_opcode op, uint32_t qpn) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = qpn;
  return wc;
}

// The queue pair failed: to error, its receives flushed.
void toError(ModelQp& qp) {
  qp.state = IBV_QPS_ERR;
  while (!qp.receives.empty()) {
    complete(qp.recvCq,
             completion(qp.receives.front(), IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp.qp.qp_num));
    qp.receives.pop_front();
  }
}

void deliverPending(ModelQp& qp) {
  while (!qp.pending.empty() && !qp.receives.empty()) {
    ibv_wc wc =
        completion(qp.receives.front(), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, qp.qp.qp_num);
    wc.imm_data = qp.pending.front().imm;
    wc.byte_len = qp.pending.front().bytes;
    wc.wc_flags = IBV_WC_WITH_IMM;
    qp.receives.pop_front();
    qp.pending.pop_front();
    complete(qp.recvCq, wc);
  }
}

bool inside(const ibv_mr* mr, uint64_t address, uint64_t bytes) {
  const uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
  return address >= base && address + bytes <= base + mr->length;
}

// What a NIC's DMA does to the target's memory. Aligned words go as single 8-byte stores: the
// target's CPU may read a word the NIC writes again (a credit count), which hardware makes
// atomic per aligned word; the rest as bytes.
void copy(uint64_t to, uint64_t from, uint64_t bytes) {
  if (((to | from | bytes) & 7) == 0) {
    for (uint64_t i = 0; i < bytes; i += 8) {
      __atomic_store_n(reinterpret_cast<uint64_t*>(to + i),
                       *reinterpret_cast<const uint64_t*>(from + i), __ATOMIC_RELAXED);
    }
    return;
  }
  std::memcpy(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes);
}

// One work request; the status it completes with.
ibv_wc_status write(Model& m, ModelQp& qp, const ibv_send_wr& wr) {
  if (wr.opcode != IBV_WR_RDMA_WRITE && wr.opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
    return IBV_WC_LOC_QP_OP_ERR;
  }
  const bool control =
      wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && (ntohl(wr.imm_data) & kControlImm);
  if (!control && m.failWrites > 0) {
    --m.failWrites;
    return m.failStatus;
  }
  auto target = m.qps.find(qp.dest);
  if (target == m.qps.end() ||
      (target->second->state != IBV_QPS_RTR && target->second->state != IBV_QPS_RTS)) {
    return IBV_WC_RETRY_EXC_ERR;  // nobody acknowledges
  }
  ModelQp& peer = *target->second;
  uint64_t bytes = 0;
  for (int s = 0; s < wr.num_sge; ++s) {
    auto mr = m.mrs.find(wr.sg_list[s].lkey);
    if (mr == m.mrs.end() || !inside(mr->second, wr.sg_list[s].addr, wr.sg_list[s].length)) {
      return IBV_WC_LOC_PROT_ERR;
    }
    bytes += wr.sg_list[s].length;
  }
  auto rmr = m.mrs.find(wr.wr.rdma.rkey);
  if (bytes > 0 && (rmr == m.mrs.end() || !inside(rmr->second, wr.wr.rdma.remote_addr, bytes) ||
                    rmr->second->pd->context != peer.qp.context)) {
    toError(peer);
    return IBV_WC_REM_ACCESS_ERR;
  }
  uint64_t at = wr.wr.rdma.remote_addr;
  for (int s = 0; s < wr.num_sge; ++s) {
    copy(at, wr.sg_list[s].addr, wr.sg_list[s].length);
    at += wr.sg_list[s].length;
  }
  if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    uint32_t imm = wr.imm_data;
    if (!control && m.replaceImm) {
      m.replaceImm = false;
      imm = htonl(m.imm);
    }
    peer.pending.push_back({imm, static_cast<uint32_t>(bytes)});
    deliverPending(peer);
  }
  return IBV_WC_SUCCESS;
}

int postSend(ibv_qp* base, ibv_send_wr* wr, ibv_send_wr** bad) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& qp = *reinterpret_cast<ModelQp*>(base);
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR) {
    *bad = wr;
    return EINVAL;
  }
  uint32_t count = 0;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) ++count;
  if (count > qp.maxSend) {
    *bad = wr;
    return ENOMEM;
  }
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    if (qp.state == IBV_QPS_ERR) {
      complete(qp.sendCq,
               completion(w->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qp.qp.qp_num));
      continue;
    }
    const ibv_wc_status status = write(m, qp, *w);
    if (status != IBV_WC_SUCCESS) {
      complete(qp.sendCq, completion(w->wr_id, status, IBV_WC_RDMA_WRITE, qp.qp.qp_num));
      toError(qp);
    } else if (w->send_flags & IBV_SEND_SIGNALED) {
      complete(qp.sendCq, completion(w->wr_id, status, IBV_WC_RDMA_WRITE, qp.qp.qp_num));
    }
  }
  return 0;
}

int postRecv(ibv_qp* base, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& qp = *reinterpret_cast<ModelQp*>(base);
  if (qp.state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    if (qp.state == IBV_QPS_ERR) {
      complete(qp.recvCq, completion(w->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp.qp.qp_num));
    } else {
      qp.receives.push_back(w->wr_id);
    }
  }
  deliverPending(qp);
  return 0;
}

// Up to n completions, picked at random among the oldest of each queue pair.
int pollCq(ibv_cq* base, int n, ibv_wc* wc) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& cq = *reinterpret_cast<ModelCq*>(base);
  int got = 0;
  while (got < n && !cq.entries.empty()) {
    std::vector<size_t> heads;
    std::unordered_set<uint32_t> seen;
    for (size_t i = 0; i < cq.entries.size() && heads.size() < 8; ++i) {
      if (seen.insert(cq.entries[i].qp_num).second) heads.push_back(i);
    }
    const size_t pick = heads[m.random() % heads.size()];
    wc[got++] = cq.entries[pick];
    cq.entries.erase(cq.entries.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  return got;
}

int modifyQp(ibv_qp* base, ibv_qp_attr* attr, int mask) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& qp = *reinterpret_cast<ModelQp*>(base);
  if ((mask & IBV_QP_STATE) == 0) return 0;
  const ibv_qp_state from = qp.state, to = attr->qp_state;
  const bool ok = (from == IBV_QPS_RESET && to == IBV_QPS_INIT) ||
                  (from == IBV_QPS_INIT && to == IBV_QPS_RTR && (mask & IBV_QP_DEST_QPN)) ||
                  (from == IBV_QPS_RTR && to == IBV_QPS_RTS) || to == IBV_QPS_ERR;
  if (!ok) return EINVAL;
  if (to == IBV_QPS_RTR) qp.dest = attr->dest_qp_num;
  if (to == IBV_QPS_ERR) {
    toError(qp);
  } else {
    qp.state = to;
  }
  return 0;
}

const VerbsCalls kModel = {
    [](int* count) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      *count = m.deviceCount;
      return m.list;
    },
    [](ibv_device**) {},
    [](ibv_device* device) -> const char* { return device->name; },
    [](ibv_device* device) {
      auto* context = new ibv_context{};
      context->device = device;
      return context;
    },
    [](ibv_context* context) {
      delete context;
      return 0;
    },
    [](ibv_context*, ibv_device_attr* attr) {
      *attr = ibv_device_attr{};
      attr->phys_port_cnt = 1;
      attr->max_qp_wr = 4096;
      attr->max_cqe = 1 << 20;
      attr->max_sge = 16;
      return 0;
    },
    [](ibv_context*, uint8_t port, ibv_port_attr* attr) {
      if (port != 1) return EINVAL;
      *attr = ibv_port_attr{};
      attr->state = IBV_PORT_ACTIVE;
      attr->link_layer = IBV_LINK_LAYER_ETHERNET;
      attr->active_mtu = IBV_MTU_1024;
      attr->max_mtu = IBV_MTU_4096;
      attr->gid_tbl_len = 2;
      return 0;
    },
    [](ibv_context*, uint8_t port, int index, ibv_gid* gid) {
      *gid = ibv_gid{};
      if (port != 1 || index < 0 || index > 1) return EINVAL;
      if (index == 0) {
        gid->raw[0] = 0xfe;  // fe80::1, link-local
        gid->raw[1] = 0x80;
        gid->raw[15] = 1;
      } else {
        gid->raw[10] = gid->raw[11] = 0xff;  // ::ffff:127.0.0.1
        gid->raw[12] = 127;
        gid->raw[15] = 1;
      }
      return 0;
    },
    [](ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t) {
      *entry = ibv_gid_entry{};
      if (kModel.query_gid(context, static_cast<uint8_t>(port), static_cast<int>(index),
                           &entry->gid) != 0) {
        return ENODATA;
      }
      entry->gid_index = index;
      entry->port_num = port;
      entry->gid_type = IBV_GID_TYPE_ROCE_V2;
      return 0;
    },
    [](ibv_context* context) {
      auto* pd = new ibv_pd{};
      pd->context = context;
      return pd;
    },
    [](ibv_pd* pd) {
      delete pd;
      return 0;
    },
    [](ibv_pd* pd, void* address, size_t bytes, int) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      auto* mr = new ibv_mr{};
      mr->context = pd->context;
      mr->pd = pd;
      mr->addr = address;
      mr->length = bytes;
      mr->lkey = mr->rkey = m.nextKey++;
      m.mrs[mr->lkey] = mr;
      return mr;
    },
    [](ibv_mr* mr) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      m.mrs.erase(mr->lkey);
      delete mr;
      return 0;
    },
    [](ibv_context* context) {
      auto* channel = new ibv_comp_channel{};
      channel->context = context;
      channel->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      return channel;
    },
    [](ibv_comp_channel* channel) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      m.channelCq.erase(channel);
      close(channel->fd);
      delete channel;
      return 0;
    },
    [](ibv_context* context, int cqe, void* user, ibv_comp_channel* channel, int) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      auto* cq = new ModelCq;
      cq->cq.context = context;
      cq->cq.channel = channel;
      cq->cq.cq_context = user;
      cq->cq.cqe = cqe;
      if (channel != nullptr) m.channelCq[channel] = cq;
      return &cq->cq;
    },
    [](ibv_cq* cq) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      delete reinterpret_cast<ModelCq*>(cq);
      return 0;
    },
    [](ibv_cq* cq, int) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      reinterpret_cast<ModelCq*>(cq)->armed = true;
      return 0;
    },
    [](ibv_comp_channel* channel, ibv_cq** cq, void** context) {
      uint64_t count = 0;
      if (read(channel->fd, &count, sizeof count) != sizeof count) return -1;
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      ModelCq* found = m.channelCq.at(channel);
      *cq = &found->cq;
      *context = found->cq.cq_context;
      return 0;
    },
    [](ibv_cq*, unsigned) {},
    pollCq,
    [](ibv_pd* pd, ibv_qp_init_attr* attr) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      auto* qp = new ModelQp;
      qp->qp.context = pd->context;
      qp->qp.pd = pd;
      qp->qp.qp_num = m.nextQpn++;
      qp->qp.qp_type = attr->qp_type;
      qp->sendCq = reinterpret_cast<ModelCq*>(attr->send_cq);
      qp->recvCq = reinterpret_cast<ModelCq*>(attr->recv_cq);
      qp->maxSend = attr->cap.max_send_wr;
      m.qps[qp->qp.qp_num] = qp;
      return &qp->qp;
    },
    modifyQp,
    [](ibv_qp* qp) {
      Model& m = model();
      std::lock_guard<std::mutex> lock(m.mutex);
      m.qps.erase(qp->qp_num);
      delete reinterpret_cast<ModelQp*>(qp);
      return 0;
    },
    postSend,
    postRecv,
};

}  // namespace

const VerbsCalls& modelCalls() { return kModel; }

void setModelDevices(int count) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.deviceCount = std::clamp(count, 1, kMaxModelDevices);
  for (int d = 0; d <= kMaxModelDevices; ++d) {
    m.list[d] = d < m.deviceCount ? &m.devices[d] : nullptr;
  }
}

int modelDevices() {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.deviceCount;
}

void failNextModelWrites(int count, ibv_wc_status status) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.failWrites = count;
  m.failStatus = status;
}

void replaceNextModelImmediate(uint32_t imm) {
  Model& m = model();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.replaceImm = true;
  m.imm = imm;
}

}  // namespace braid::transport::verbs
