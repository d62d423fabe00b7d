#include "comm/bootstrap/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace braid::bootstrap::net {
namespace {

// Waits for `events` on fd until the deadline; false on timeout.
bool waitFor(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.millisLeft());
    if (rc > 0) return true;
    if (rc == 0) {
      if (deadline.expired()) return false;
      continue;
    }
    if (errno != EINTR) return true;  // let the caller's send/recv report the error
  }
}

}  // namespace

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    failErrno("fcntl(O_NONBLOCK)", errno);
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) failErrno("fcntl(FD_CLOEXEC)", errno);
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_in ipv4Sockaddr(const std::string& ip, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  BRAID_ENFORCE(::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) == 1, ErrorCode::kInvalidUsage,
                "'{}' is not an IPv4 address", ip);
  return addr;
}

std::string endpointText(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

std::string localIp(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET_ADDRSTRLEN] = "";
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return text;
}

Io sendAll(int fd, const char* data, size_t size, Deadline deadline, int* err) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(fd, POLLOUT, deadline)) return Io::kTimeout;
      continue;
    }
    *err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

Io recvAll(int fd, char* data, size_t size, Deadline deadline, int* err) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Io::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFor(fd, POLLIN, deadline)) return Io::kTimeout;
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

std::string errnoText(int err) {
  char buf[256];
  return std::string(strerror_r(err, buf, sizeof buf));
}

}  // namespace braid::bootstrap::net
