// Small socket helpers shared by the store's server and client (internal to comm/bootstrap).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <string>

#include "braid/deadline.hpp"

namespace braid::bootstrap::net {

/// Outcome of a bounded socket transfer.
enum class Io { kOk, kTimeout, kClosed, kError };

/// Makes `fd` non-blocking and close-on-exec; throws kSystemError.
void setNonBlocking(int fd);
/// Disables Nagle (small request/reply frames).
void setNoDelay(int fd);
/// sockaddr_in for a dotted IPv4 address; throws kInvalidUsage on a malformed one.
sockaddr_in ipv4Sockaddr(const std::string& ip, int port);
/// "a.b.c.d:port" of a sockaddr_in.
std::string endpointText(const sockaddr_in& addr);
/// The dotted IPv4 address of the local end of a connected socket ("" if unknown).
std::string localIp(int fd);
/// Sends all `size` bytes on a non-blocking socket by `deadline`; *err gets errno on kError.
Io sendAll(int fd, const char* data, size_t size, Deadline deadline, int* err);
/// Receives exactly `size` bytes on a non-blocking socket by `deadline`.
Io recvAll(int fd, char* data, size_t size, Deadline deadline, int* err);
/// strerror text for errno `err`.
std::string errnoText(int err);

}  // namespace braid::bootstrap::net
