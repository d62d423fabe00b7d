#include "transport/ofi/provider.h"

#include <fmt/format.h>
#include <rdma/fi_errno.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string_view>

#include "common/env.h"
#include "transport/ofi/libfabric.h"

namespace braid::transport::ofi {

namespace {

constexpr const char* kHardware[] = {"verbs", "efa", "psm2", "psm3", "opx", "cxi", "usnic"};
constexpr const char* kSoftwareDefault = "tcp;ofi_rxm";

ProviderChoice lookUp(const std::string& forced) {
  ProviderChoice c;
  std::string why;
  InfoPtr all = getInfo("", false, &why);
  for (fi_info* i = all.get(); i != nullptr; i = i->next) {
    const std::string name = i->fabric_attr->prov_name;
    if ((", " + c.listed + ", ").find(", " + name + ", ") == std::string::npos) {
      c.listed += (c.listed.empty() ? "" : ", ") + name;
    }
    if (forced.empty() && c.name.empty() && hardwareProvider(name)) c.name = name;
  }
  if (!forced.empty()) {
    c.name = forced;
    c.how = "BRAID_OFI_PROVIDER";
  } else if (!c.name.empty()) {
    c.how = "the first hardware provider listed";
  } else {
    c.name = kSoftwareDefault;
    c.how = "no hardware provider listed: the software default";
  }
  c.hardware = hardwareProvider(c.name);
  InfoPtr chosen = getInfo(c.name, true, &why);
  c.rma = chosen != nullptr;
  if (!chosen) chosen = getInfo(c.name, false, &why);
  c.usable = chosen != nullptr;
  if (!c.usable) {
    c.why = fmt::format("libfabric provider '{}' ({}) is not usable here: {} (listed: {})", c.name,
                        c.how, why, c.listed.empty() ? "none" : c.listed);
  }
  return c;
}

}  // namespace

bool hardwareProvider(const std::string& name) {
  const std::string core = name.substr(0, name.find(';'));
  for (const char* h : kHardware) {
    if (core == h) return true;
  }
  return false;
}

void InfoDeleter::operator()(fi_info* info) const { libfabric()->freeinfo(info); }

InfoPtr getInfo(const std::string& name, bool rma, std::string* why) {
  const Libfabric* lib = libfabric(why);
  if (lib == nullptr) return nullptr;
  InfoPtr hints(lib->dupinfo(nullptr));  // fi_allocinfo()
  if (!hints) {
    *why = "fi_allocinfo (fi_dupinfo(NULL)) failed";
    return nullptr;
  }
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | (rma ? FI_RMA | FI_WRITE | FI_REMOTE_WRITE : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;  // every operation's context is an fi_context2
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // one mutex serialises every call
  if (!name.empty()) hints->fabric_attr->prov_name = strdup(name.c_str());  // freed with hints
  fi_info* info = nullptr;
  int rc = lib->getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints.get(), &info);
  if (rc != 0) {
    *why = fmt::format("fi_getinfo(provider '{}', RDM, tagged{}): {}",
                       name.empty() ? "any" : name, rma ? ", RMA" : "", fiError(-rc));
    return nullptr;
  }
  return InfoPtr(info);
}

void giveUniqueSourceName(fi_info* info) {
  constexpr std::string_view kShmPrefix = "fi_shm://";
  if (info->addr_format != FI_ADDR_STR || info->src_addr == nullptr) return;
  const std::string_view current(static_cast<const char*>(info->src_addr),
                                 strnlen(static_cast<const char*>(info->src_addr),
                                         info->src_addrlen));
  if (current.substr(0, kShmPrefix.size()) != kShmPrefix) return;
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) | device();
  const std::string unique = fmt::format("{}braid-{}-{:016x}", kShmPrefix, getpid(), nonce);
  free(info->src_addr);  // fi_freeinfo frees it, so it must come from malloc
  info->src_addr = strdup(unique.c_str());
  info->src_addrlen = unique.size() + 1;
}

ProviderChoice chooseProvider() {
  static std::mutex mutex;
  static std::map<std::string, ProviderChoice> cache;  // by BRAID_OFI_PROVIDER
  const std::string forced = envString("BRAID_OFI_PROVIDER").value_or("");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(forced);
  if (it == cache.end()) it = cache.emplace(forced, lookUp(forced)).first;
  return it->second;
}

}  // namespace braid::transport::ofi
