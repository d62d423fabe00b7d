// The libibverbs calls the verbs transport makes, through one table: the real library, or a
// software model of it (model.cc) that the tests switch on to run the transport's protocol
// (chunked writes, immediates, credits, completions out of order between queue pairs, error
// completions) in every CI run, on machines without an RDMA device. Internal to transport/verbs.
#pragma once

#include <infiniband/verbs.h>

namespace braid::transport::verbs {

struct VerbsCalls {
  ibv_device** (*get_device_list)(int* count);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  int (*query_gid_ex)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                      uint32_t flags);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* address, size_t bytes, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context);
  int (*destroy_comp_channel)(ibv_comp_channel* channel);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* user, ibv_comp_channel* channel,
                       int vector);
  int (*destroy_cq)(ibv_cq* cq);
  int (*req_notify_cq)(ibv_cq* cq, int solicitedOnly);
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** context);
  void (*ack_cq_events)(ibv_cq* cq, unsigned events);
  int (*poll_cq)(ibv_cq* cq, int entries, ibv_wc* wc);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroy_qp)(ibv_qp* qp);
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
};

/// The table in use: libibverbs, or the model once useVerbsModel(true) was called.
const VerbsCalls& verbsCalls();

/// Tests: switches every verbs call of this process to the software model (device "model0" with
/// an active RoCE port, or more: setModelDevices; queue pairs of this process reach each other:
/// ranks as threads) or back.
/// Only while no verbs endpoint exists.
void useVerbsModel(bool on);
bool usingVerbsModel();

/// Tests, model only: how many devices the model lists (1..kMaxModelDevices, "model0",
/// "model1", ...; default 1), each with one active RoCE port; queue pairs of any of them reach
/// each other. Only while no verbs endpoint exists.
inline constexpr int kMaxModelDevices = 4;
void setModelDevices(int count);
int modelDevices();

/// Tests, model only: the next `count` RDMA writes (of data, not control) posted anywhere fail
/// with `status` at the sender (its queue pair then goes to error and flushes the rest), as a
/// NIC reports a lost peer (IBV_WC_RETRY_EXC_ERR) or a refused key (IBV_WC_REM_ACCESS_ERR).
void failNextModelWrites(int count, ibv_wc_status status);

/// Tests, model only: the next data write with an immediate anywhere carries `imm` instead (a
/// peer that breaks the protocol: an immediate naming no slot, a slot out of turn).
void replaceNextModelImmediate(uint32_t imm);

}  // namespace braid::transport::verbs
