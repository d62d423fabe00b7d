// The ofi backend (transport/backend.h), built where configure found libfabric
// (transport/ofi/missing.cc stands in elsewhere): available when its provider (provider.h) is
// usable here; reaches every peer; chosen by default only with a hardware provider.
#include <fmt/format.h>

#include "transport/backend.h"
#include "transport/ofi/ofi.h"
#include "transport/ofi/provider.h"

namespace braid::transport {

namespace {

class OfiBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kOfi; }
  bool available(std::string* why) const override {
    ofi::ProviderChoice c = ofi::chooseProvider();
    if (!c.usable && why != nullptr) *why = c.why;
    return c.usable;
  }
  bool automatic(std::string* why) const override {
    ofi::ProviderChoice c = ofi::chooseProvider();
    if (why != nullptr) {
      *why = fmt::format("provider {} is a {} one", c.name, c.hardware ? "hardware" : "software");
    }
    return c.hardware;
  }
  std::string detail() const override {
    ofi::ProviderChoice c = ofi::chooseProvider();
    return fmt::format("provider {}: {}; libfabric lists {}", c.name, c.how,
                       c.listed.empty() ? "none" : c.listed);
  }
  bool canReach(const HostInfo&, const HostInfo&) const override { return true; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<ofi::OfiTransport>(config, kv);
  }
};

}  // namespace

const Backend& ofiBackend() {
  static const OfiBackend backend;
  return backend;
}

}  // namespace braid::transport
