// The ofi backend of a build without libfabric (transport/CMakeLists.txt compiles this file
// instead of transport/ofi/backend.cc): listed, never available, and says what to install.
#include "transport/backend.h"

namespace braid::transport {

const Backend& ofiBackend() {
  static const MissingBackend backend(
      Kind::kOfi, /*deviceMemory=*/false,
      "this build has no libfabric (ofi) transport (configure found no libfabric: apt-get install "
      "libfabric-dev, then reconfigure with BRAID_WITH_OFI=AUTO or ON)");
  return backend;
}

}  // namespace braid::transport
