// The ucx backend (transport/backend.h), built where configure found UCX (transport/ucx/missing.cc
// stands in elsewhere); reaches every peer, also on this host (tests and measurements force it),
// where libucp loads.
#include "transport/ucx/libucx.h"
#include "transport/ucx/ucx.h"

namespace braid::transport {

namespace {

/// Reaches every peer once libucp loads (transport/ucx/libucx.h).
class UcxBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kUcx; }
  bool available(std::string* why) const override { return ucx::libucx(why) != nullptr; }
  bool canReach(const HostInfo&, const HostInfo&) const override { return true; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<ucx::UcxTransport>(config, kv);
  }
};

}  // namespace

const Backend& ucxBackend() {
  static const UcxBackend backend;
  return backend;
}

}  // namespace braid::transport
