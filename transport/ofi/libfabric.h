// libfabric's exported functions, from the library loaded at the ofi backend's first use
// (transport/shared_library.h says why it is not linked). The rest of libfabric's API is inline
// in its headers and calls through the provider's tables, so these are all braid needs.
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace braid::transport::ofi {

struct Libfabric {
  decltype(&::fi_getinfo) getinfo;
  decltype(&::fi_freeinfo) freeinfo;
  decltype(&::fi_dupinfo) dupinfo;
  decltype(&::fi_fabric) fabric;
  decltype(&::fi_strerror) strerror;
};

/// libfabric.so.1, loaded once (thread-safe); null with *why (what failed) when it cannot be.
const Libfabric* libfabric(std::string* why = nullptr);

/// fi_strerror(err) (err positive, as fi_strerror takes it) through the loaded library.
const char* fiError(int err);

}  // namespace braid::transport::ofi
