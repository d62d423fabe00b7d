// The ucx backend of a build without UCX (transport/CMakeLists.txt compiles this file instead of
// transport/ucx/backend.cc): listed, never available, and says what to install.
#include "transport/backend.h"

namespace braid::transport {

const Backend& ucxBackend() {
  static const MissingBackend backend(
      Kind::kUcx, /*deviceMemory=*/false,
      "this build has no UCX transport (configure found no UCX: apt-get install libucx-dev, then "
      "reconfigure with BRAID_WITH_UCX=AUTO or ON)");
  return backend;
}

}  // namespace braid::transport
