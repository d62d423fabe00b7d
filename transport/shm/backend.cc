// The shm backend (transport/backend.h): always built; reaches the peers on this host.
#include "transport/shm/shm.h"

namespace braid::transport {

const Backend& shmBackend() {
  static const BuiltBackend<shm::ShmTransport> backend(Kind::kShm, /*sameHostOnly=*/true);
  return backend;
}

}  // namespace braid::transport
