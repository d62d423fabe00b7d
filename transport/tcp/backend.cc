// The tcp backend (transport/backend.h): always built; reaches every peer (the fallback).
#include "transport/tcp/tcp.h"

namespace braid::transport {
namespace {

class TcpBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kTcp; }
  bool available(std::string*) const override { return true; }
  bool canReach(const HostInfo&, const HostInfo&) const override { return true; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue& kv) const override {
    return std::make_unique<tcp::TcpTransport>(config, kv);
  }
};

}  // namespace

const Backend& tcpBackend() {
  static const TcpBackend backend;
  return backend;
}

}  // namespace braid::transport
