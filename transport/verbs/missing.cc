// The verbs backend of a build without libibverbs (transport/CMakeLists.txt compiles this file
// instead of transport/verbs/backend.cc): listed, never available, and says what to install.
#include "transport/backend.h"

namespace braid::transport {

const Backend& verbsBackend() {
  static const MissingBackend backend(
      Kind::kVerbs, /*deviceMemory=*/false,
      "this build has no verbs transport (configure found no libibverbs: apt-get install "
      "libibverbs-dev, then reconfigure with BRAID_WITH_VERBS=AUTO or ON)");
  return backend;
}

}  // namespace braid::transport
