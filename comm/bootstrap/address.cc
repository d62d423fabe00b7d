#include "comm/bootstrap/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/env.h"
#include "common/error.h"

namespace braid::bootstrap {
namespace {

// Parses a decimal port 0..65535; -1 when malformed.
int parsePort(const std::string& text) {
  if (text.empty() || text.size() > 5) return -1;
  int port = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    port = port * 10 + (c - '0');
  }
  return port <= 65535 ? port : -1;
}

}  // namespace

StoreAddress StoreAddress::parse(const std::string& text) {
  size_t colon = text.rfind(':');
  BRAID_ENFORCE(colon != std::string::npos && colon > 0, ErrorCode::kInvalidUsage,
                "store address '{}' is not of the form host:port", text);
  int port = parsePort(text.substr(colon + 1));
  BRAID_ENFORCE(port >= 0, ErrorCode::kInvalidUsage,
                "store address '{}' has no valid port (0..65535) after the ':'", text);
  return StoreAddress{text.substr(0, colon), port};
}

StoreAddress StoreAddress::fromEnvironment() {
  auto host = envString("MASTER_ADDR");
  BRAID_ENFORCE(host.has_value(), ErrorCode::kInvalidUsage,
                "environment variable MASTER_ADDR is not set (the store host; braidrun sets it)");
  auto portText = envString("MASTER_PORT");
  BRAID_ENFORCE(portText.has_value(), ErrorCode::kInvalidUsage,
                "environment variable MASTER_PORT is not set (the store port; braidrun sets it)");
  int port = parsePort(*portText);
  BRAID_ENFORCE(port > 0, ErrorCode::kInvalidUsage,
                "environment variable MASTER_PORT='{}' is not a port number (1..65535)", *portText);
  return StoreAddress{*host, port};
}

std::string StoreAddress::toString() const { return host + ":" + std::to_string(port); }

std::string resolveIPv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  BRAID_ENFORCE(rc == 0 && found != nullptr, ErrorCode::kInvalidUsage,
                "cannot resolve host '{}' to an IPv4 address: {}", host,
                rc == 0 ? "no address" : gai_strerror(rc));
  char text[INET_ADDRSTRLEN] = "";
  const auto* addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::inet_ntop(AF_INET, &addr->sin_addr, text, sizeof text);
  ::freeaddrinfo(found);
  return text;
}

std::string storeBindAddress(const std::string& host) {
  if (auto forced = envString("BRAID_STORE_BIND")) return resolveIPv4(*forced);
  return resolveIPv4(host);
}

int findFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) failErrno("socket() while looking for a free port", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    failErrno("bind(port 0) while looking for a free port", err);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace braid::bootstrap
