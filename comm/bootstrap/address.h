// "host:port" addresses of a store and IPv4 name resolution.
#pragma once

#include <string>

namespace braid::bootstrap {

/// Where a StoreServer listens. host is a name or a dotted IPv4 address.
struct StoreAddress {
  std::string host;
  int port = 0;

  /// Parses "host:port" (port 0..65535). Throws kInvalidUsage naming the text when malformed.
  static StoreAddress parse(const std::string& text);
  /// From MASTER_ADDR and MASTER_PORT. Throws kInvalidUsage naming a missing/malformed variable.
  static StoreAddress fromEnvironment();
  /// "host:port".
  std::string toString() const;
};

/// The first IPv4 address of `host` (a name or dotted address) as dotted text, via getaddrinfo.
/// Throws kInvalidUsage naming the host when it does not resolve.
std::string resolveIPv4(const std::string& host);

/// The IPv4 address a store that ranks are told to reach at `host` listens on: `host` resolved
/// as the ranks resolve it, so the store is not reachable on this host's other interfaces; or
/// BRAID_STORE_BIND when set (e.g. 0.0.0.0 for every interface, when ranks reach this host at an
/// address it does not have, behind NAT or a service address). Throws kInvalidUsage when the
/// address does not resolve.
std::string storeBindAddress(const std::string& host);

/// A TCP port that was free on all interfaces a moment ago (bind to port 0, read it, close).
/// Another process may take it before you bind it; fine for launchers and tests.
int findFreePort();

}  // namespace braid::bootstrap
