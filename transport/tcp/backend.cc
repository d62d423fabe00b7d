// The tcp backend (transport/backend.h): always built; reaches every peer (the fallback).
#include "transport/tcp/tcp.h"

namespace braid::transport {

const Backend& tcpBackend() {
  static const BuiltBackend<tcp::TcpTransport> backend(Kind::kTcp, /*sameHostOnly=*/false);
  return backend;
}

}  // namespace braid::transport
