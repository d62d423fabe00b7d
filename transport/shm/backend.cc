// The shm backend (transport/backend.h): always built; reaches the peers on this host.
#include "transport/shm/shm.h"

namespace braid::transport {
namespace {

class ShmBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kShm; }
  bool available(std::string*) const override { return true; }
  bool canReach(const HostInfo& local, const HostInfo& peer) const override {
    return local.host == peer.host;
  }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<shm::ShmTransport>(config, kv);
  }
};

}  // namespace

const Backend& shmBackend() {
  static const ShmBackend backend;
  return backend;
}

}  // namespace braid::transport
