// The verbs backend (transport/backend.h), built where configure found libibverbs
// (transport/verbs/missing.cc stands in elsewhere): available where a device has an active port
// (device.h), and then picked by default between hosts, before ofi, ucx and tcp; reaches every
// peer.
#include "transport/backend.h"

#include <fmt/format.h>

#include "transport/verbs/device.h"
#include "transport/verbs/verbs.h"

namespace braid::transport {

namespace {

class VerbsBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kVerbs; }
  bool available(std::string* why) const override {
    verbs::DeviceChoice c = verbs::chooseDevice();
    if (!c.usable && why != nullptr) *why = c.why;
    return c.usable;
  }
  bool automatic(std::string* why) const override {
    verbs::DeviceChoice c = verbs::chooseDevice();
    if (why != nullptr) *why = fmt::format("an active RDMA port: {} port {}", c.name, c.port);
    return true;
  }
  std::string detail() const override {
    verbs::DeviceChoice c = verbs::chooseDevice();
    std::string gid = c.gidIndex >= 0 ? fmt::format(", GID {} {} ({})", c.gidIndex,
                                                    verbs::gidText(c.gid), c.gidHow)
                                      : std::string();
    return fmt::format("device {} port {} ({}, {}{}); devices: {}", c.name, c.port, c.how,
                       c.ethernet ? "RoCE" : "InfiniBand", gid, c.listed);
  }
  bool canReach(const HostInfo&, const HostInfo&) const override { return true; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<verbs::VerbsTransport>(config, kv);
  }
};

}  // namespace

const Backend& verbsBackend() {
  static const VerbsBackend backend;
  return backend;
}

}  // namespace braid::transport
