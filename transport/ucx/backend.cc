// The ucx backend (transport/backend.h), built where configure found UCX (transport/ucx/missing.cc
// stands in elsewhere); reaches every peer, also on this host (tests and measurements force it).
#include "transport/ucx/ucx.h"

namespace braid::transport {

const Backend& ucxBackend() {
  static const BuiltBackend<ucx::UcxTransport> backend(Kind::kUcx, /*sameHostOnly=*/false);
  return backend;
}

}  // namespace braid::transport
