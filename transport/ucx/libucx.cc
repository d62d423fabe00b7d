#include "transport/ucx/libucx.h"

#include "transport/shared_library.h"

namespace braid::transport::ucx {

namespace {

bool bindAll(void* handle, const char* name, Libucx* c, std::string* why) {
#define BRAID_BIND(fn) bindSymbol(handle, name, #fn, &c->fn, why)
  return BRAID_BIND(ucp_init_version) && BRAID_BIND(ucp_cleanup) && BRAID_BIND(ucp_config_read) &&
         BRAID_BIND(ucp_config_modify) && BRAID_BIND(ucp_config_release) &&
         BRAID_BIND(ucp_worker_create) && BRAID_BIND(ucp_worker_destroy) &&
         BRAID_BIND(ucp_worker_get_address) && BRAID_BIND(ucp_worker_release_address) &&
         BRAID_BIND(ucp_worker_get_efd) && BRAID_BIND(ucp_worker_arm) &&
         BRAID_BIND(ucp_worker_progress) && BRAID_BIND(ucp_worker_set_am_recv_handler) &&
         BRAID_BIND(ucp_ep_create) && BRAID_BIND(ucp_ep_close_nbx) &&
         BRAID_BIND(ucp_tag_send_nbx) && BRAID_BIND(ucp_tag_recv_nbx) &&
         BRAID_BIND(ucp_am_send_nbx) && BRAID_BIND(ucp_am_data_release) &&
         BRAID_BIND(ucp_request_check_status) && BRAID_BIND(ucp_request_cancel) &&
         BRAID_BIND(ucp_request_free) && BRAID_BIND(ucs_status_string);
#undef BRAID_BIND
}

// libucs comes with libucp (ucs_status_string is found through it).
LoadedLibrary<Libucx>& library() {
  static LoadedLibrary<Libucx> loaded("libucp.so.0", bindAll);
  return loaded;
}

}  // namespace

const Libucx* libucx(std::string* why) { return library().get(why); }

const Libucx& ucx() { return *library().get(nullptr); }

}  // namespace braid::transport::ucx
