// UCX's functions (libucp, and libucs through it), from the library loaded at the ucx backend's
// first use (transport/shared_library.h says why it is not linked). Called as
// ucx().ucp_worker_progress(worker): one member per function, named as UCX names it.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace braid::transport::ucx {

struct Libucx {
  decltype(&::ucp_init_version) ucp_init_version;  // what the inline ucp_init() calls
  decltype(&::ucp_cleanup) ucp_cleanup;
  decltype(&::ucp_config_read) ucp_config_read;
  decltype(&::ucp_config_modify) ucp_config_modify;
  decltype(&::ucp_config_release) ucp_config_release;
  decltype(&::ucp_worker_create) ucp_worker_create;
  decltype(&::ucp_worker_destroy) ucp_worker_destroy;
  decltype(&::ucp_worker_get_address) ucp_worker_get_address;
  decltype(&::ucp_worker_release_address) ucp_worker_release_address;
  decltype(&::ucp_worker_get_efd) ucp_worker_get_efd;
  decltype(&::ucp_worker_arm) ucp_worker_arm;
  decltype(&::ucp_worker_progress) ucp_worker_progress;
  decltype(&::ucp_worker_set_am_recv_handler) ucp_worker_set_am_recv_handler;
  decltype(&::ucp_ep_create) ucp_ep_create;
  decltype(&::ucp_ep_close_nbx) ucp_ep_close_nbx;
  decltype(&::ucp_tag_send_nbx) ucp_tag_send_nbx;
  decltype(&::ucp_tag_recv_nbx) ucp_tag_recv_nbx;
  decltype(&::ucp_am_send_nbx) ucp_am_send_nbx;
  decltype(&::ucp_am_data_release) ucp_am_data_release;
  decltype(&::ucp_request_check_status) ucp_request_check_status;
  decltype(&::ucp_request_cancel) ucp_request_cancel;
  decltype(&::ucp_request_free) ucp_request_free;
  decltype(&::ucs_status_string) ucs_status_string;
};

/// libucp.so.0, loaded once (thread-safe); null with *why (what failed) when it cannot be.
const Libucx* libucx(std::string* why = nullptr);

/// The loaded library; only where libucx() succeeded (a UcxTransport exists).
const Libucx& ucx();

}  // namespace braid::transport::ucx
