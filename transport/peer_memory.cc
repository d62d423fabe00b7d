// Cross-memory attach (peer_memory.h).
#include "transport/peer_memory.h"

#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

namespace braid::transport {
namespace {

// The token and the pid it was drawn in: a child forked after the parent drew one must not
// pass for its parent, so a changed pid draws anew.
struct Probe {
  std::mutex mutex;
  pid_t pid = 0;
  uint64_t token = 0;  // read by peers through process_vm_readv
};

Probe& probe() {
  static Probe p;
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.pid != ::getpid()) {
    std::random_device rd;
    p.pid = ::getpid();
    p.token = ((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(p.pid)) | 1;
  }
  return p;
}

// process_vm_readv, continued after partial transfers and EINTR.
int transfer(int64_t pid, char* local, char* remote, size_t bytes) {
  while (bytes > 0) {
    iovec l{local, bytes};
    iovec r{remote, bytes};
    const ssize_t n = ::process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;  // nothing moved: the rest of the range is not mapped
    local += n;
    remote += n;
    bytes -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

uint64_t processToken() { return probe().token; }
const uint64_t* processProbe() { return &probe().token; }

int readPeerMemory(int64_t pid, const void* remote, void* local, size_t bytes) {
  return transfer(pid, static_cast<char*>(local),
                  const_cast<char*>(static_cast<const char*>(remote)), bytes);
}

bool probePeerMemory(int64_t pid, uint64_t probeAddress, uint64_t token, std::string* why) {
  uint64_t seen = 0;
  const int err = readPeerMemory(pid, reinterpret_cast<const void*>(probeAddress), &seen,
                                 sizeof seen);
  if (err != 0) {
    *why = fmt::format("process_vm_readv of pid {} failed: {}", pid, std::strerror(err));
    return false;
  }
  if (seen != token) {
    *why = fmt::format("pid {} here is another process than the peer's (another pid namespace)",
                       pid);
    return false;
  }
  return true;
}

}  // namespace braid::transport
