// Which libfabric provider the ofi transport uses, and the fi_info it opens: BRAID_OFI_PROVIDER
// names one ("tcp;ofi_rxm", "shm", "udp;ofi_rxd", "verbs;ofi_rxm", "efa", ...); unset, the first
// hardware provider libfabric lists (verbs, efa, psm2, psm3, opx, cxi, usnic), else tcp;ofi_rxm.
// Only with a hardware provider does the registry choose ofi by itself (backend.cc).
#pragma once

#include <rdma/fabric.h>

#include <memory>
#include <string>

namespace braid::transport::ofi {

struct ProviderChoice {
  bool usable = false;    ///< fi_getinfo found it with the capabilities braid needs
  std::string name;       ///< as libfabric names it: "tcp;ofi_rxm"
  bool hardware = false;  ///< its core provider drives a NIC (verbs, efa, ...)
  bool rma = false;       ///< it offers FI_RMA (remote writes) beside tagged messages
  std::string how;        ///< how it was chosen ("BRAID_OFI_PROVIDER", "the first hardware ...")
  std::string why;        ///< !usable: what failed, in one line
  std::string listed;     ///< the RDM providers libfabric lists here, comma-separated
};

/// The provider for the current BRAID_OFI_PROVIDER (looked up once per value; thread-safe).
ProviderChoice chooseProvider();

/// Whether `name`'s core provider (before the first ';') drives hardware.
bool hardwareProvider(const std::string& name);

/// Frees with the loaded library's fi_freeinfo (an fi_info exists only once it is loaded).
struct InfoDeleter {
  void operator()(fi_info* info) const;
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// fi_getinfo for RDM endpoints with tagged messages (and with `rma`, remote writes: FI_RMA,
/// FI_WRITE, FI_REMOTE_WRITE) from provider `name` (every provider when empty), accepting every
/// memory-registration mode braid handles (FI_MR_LOCAL, VIRT_ADDR, ALLOCATED, PROV_KEY,
/// ENDPOINT). Null with *why set ("fi_getinfo(...): <error>", or why libfabric cannot be loaded)
/// on failure.
InfoPtr getInfo(const std::string& name, bool rma, std::string* why);

/// For the shm provider, replaces `info`'s source address ("fi_shm://<pid>") with one no other
/// endpoint can hold ("fi_shm://braid-<pid>-<random>"); other providers' info is left alone.
/// Why: shm names its region /dev/shm/<pid>:<uid>:<endpoint index>, and a process killed by
/// SIGKILL leaves its region behind. When the pid comes round again, a new rank with the same
/// endpoint index finds the name taken and fi_enable fails with EBUSY (seen in CI).
void giveUniqueSourceName(fi_info* info);

}  // namespace braid::transport::ofi
