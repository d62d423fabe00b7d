// The table of libibverbs calls (calls.h): the real library's, or the model's (model.cc).
#include "transport/verbs/calls.h"

#include <atomic>

namespace braid::transport::verbs {

const VerbsCalls& modelCalls();  // model.cc

namespace {

// Lambdas, not the functions themselves: several are inline wrappers or macros in verbs.h.
const VerbsCalls kLibibverbs = {
    [](int* count) { return ibv_get_device_list(count); },
    [](ibv_device** list) { ibv_free_device_list(list); },
    [](ibv_device* device) { return ibv_get_device_name(device); },
    [](ibv_device* device) { return ibv_open_device(device); },
    [](ibv_context* context) { return ibv_close_device(context); },
    [](ibv_context* context, ibv_device_attr* attr) { return ibv_query_device(context, attr); },
    [](ibv_context* context, uint8_t port, ibv_port_attr* attr) {
      return ibv_query_port(context, port, attr);
    },
    [](ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
      return ibv_query_gid(context, port, index, gid);
    },
    [](ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags) {
      return ibv_query_gid_ex(context, port, index, entry, flags);
    },
    [](ibv_context* context) { return ibv_alloc_pd(context); },
    [](ibv_pd* pd) { return ibv_dealloc_pd(pd); },
    [](ibv_pd* pd, void* address, size_t bytes, int access) {
      return ibv_reg_mr(pd, address, bytes, access);
    },
    [](ibv_mr* mr) { return ibv_dereg_mr(mr); },
    [](ibv_context* context) { return ibv_create_comp_channel(context); },
    [](ibv_comp_channel* channel) { return ibv_destroy_comp_channel(channel); },
    [](ibv_context* context, int cqe, void* user, ibv_comp_channel* channel, int vector) {
      return ibv_create_cq(context, cqe, user, channel, vector);
    },
    [](ibv_cq* cq) { return ibv_destroy_cq(cq); },
    [](ibv_cq* cq, int solicitedOnly) { return ibv_req_notify_cq(cq, solicitedOnly); },
    [](ibv_comp_channel* channel, ibv_cq** cq, void** context) {
      return ibv_get_cq_event(channel, cq, context);
    },
    [](ibv_cq* cq, unsigned events) { ibv_ack_cq_events(cq, events); },
    [](ibv_cq* cq, int entries, ibv_wc* wc) { return ibv_poll_cq(cq, entries, wc); },
    [](ibv_pd* pd, ibv_qp_init_attr* attr) { return ibv_create_qp(pd, attr); },
    [](ibv_qp* qp, ibv_qp_attr* attr, int mask) { return ibv_modify_qp(qp, attr, mask); },
    [](ibv_qp* qp) { return ibv_destroy_qp(qp); },
    [](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); },
    [](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); },
};

std::atomic<bool> gModel{false};

}  // namespace

const VerbsCalls& verbsCalls() {
  return gModel.load(std::memory_order_acquire) ? modelCalls() : kLibibverbs;
}

void useVerbsModel(bool on) { gModel.store(on, std::memory_order_release); }

bool usingVerbsModel() { return gModel.load(std::memory_order_acquire); }

}  // namespace braid::transport::verbs
