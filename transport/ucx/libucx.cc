#include "transport/ucx/libucx.h"

#include <mutex>

#include "transport/shared_library.h"

namespace braid::transport::ucx {

namespace {

constexpr const char* kName = "libucp.so.0";  // libucs comes with it (ucs_status_string)

struct Loaded {
  Libucx calls{};
  bool ok = false;
  std::string why;
};

const Loaded& load() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = loadKeepingSignals(kName, &loaded.why);
    if (handle == nullptr) return;
    Libucx& c = loaded.calls;
    std::string& why = loaded.why;
#define BRAID_BIND(fn) bindSymbol(handle, kName, #fn, &c.fn, &why)
    loaded.ok = BRAID_BIND(ucp_init_version) && BRAID_BIND(ucp_cleanup) &&
                BRAID_BIND(ucp_config_read) && BRAID_BIND(ucp_config_modify) &&
                BRAID_BIND(ucp_config_release) && BRAID_BIND(ucp_worker_create) &&
                BRAID_BIND(ucp_worker_destroy) && BRAID_BIND(ucp_worker_get_address) &&
                BRAID_BIND(ucp_worker_release_address) && BRAID_BIND(ucp_worker_get_efd) &&
                BRAID_BIND(ucp_worker_arm) && BRAID_BIND(ucp_worker_progress) &&
                BRAID_BIND(ucp_worker_set_am_recv_handler) && BRAID_BIND(ucp_ep_create) &&
                BRAID_BIND(ucp_ep_close_nbx) && BRAID_BIND(ucp_tag_send_nbx) &&
                BRAID_BIND(ucp_tag_recv_nbx) && BRAID_BIND(ucp_am_send_nbx) &&
                BRAID_BIND(ucp_am_data_release) && BRAID_BIND(ucp_request_check_status) &&
                BRAID_BIND(ucp_request_cancel) && BRAID_BIND(ucp_request_free) &&
                BRAID_BIND(ucs_status_string);
#undef BRAID_BIND
    // Never closed: UCX's transports and threads stay until the process ends.
  });
  return loaded;
}

}  // namespace

const Libucx* libucx(std::string* why) {
  const Loaded& loaded = load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.calls : nullptr;
}

const Libucx& ucx() { return load().calls; }

}  // namespace braid::transport::ucx
