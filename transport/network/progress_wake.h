// How user threads wake a network endpoint's progress thread (tcp, ucx; network_endpoint.h): an
// eventfd the thread polls along with its sockets / worker fd, written only when the thread
// announced a sleep. Dekker as in the doorbell: the thread announces (flag, fence), checks for
// work once more, then sleeps; a user thread makes its work visible, fences, and writes the fd if
// the flag is set. No wake-up is lost, and a busy progress thread costs users no system call.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

#include "common/error.h"

namespace braid::transport {

class ProgressWake {
 public:
  ProgressWake() = default;
  ~ProgressWake() { close(); }
  ProgressWake(const ProgressWake&) = delete;
  ProgressWake& operator=(const ProgressWake&) = delete;

  /// Creates the eventfd; throws kSystemError naming `what` ("rank 0: eventfd") on failure.
  void open(const std::string& what) {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0) failErrno(what, errno);
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// For the progress thread's poll / epoll set; -1 before open().
  int fd() const { return fd_; }

  /// Progress thread, before its last check for work: from here on wake() writes the fd.
  void announceSleep() {
    sleeping_.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker with wake()
  }
  /// Progress thread, after it slept.
  void endSleep() { sleeping_.store(0, std::memory_order_relaxed); }
  /// Whether the progress thread announced a sleep (a hint, no ordering).
  bool sleeping() const { return sleeping_.load(std::memory_order_relaxed) != 0; }
  /// Progress thread, when the fd fired: empties it.
  void drain() {
    uint64_t value;
    while (read(fd_, &value, sizeof value) > 0) {
    }
  }

  /// A user thread after making work visible: wakes the progress thread if it sleeps.
  void wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping()) kick();
  }
  /// Wakes the progress thread whether or not it sleeps (abort, stop).
  void kick() {
    if (fd_ < 0) return;
    uint64_t one = 1;
    ssize_t ignored = write(fd_, &one, sizeof one);
    (void)ignored;
  }

 private:
  int fd_ = -1;
  alignas(64) std::atomic<uint32_t> sleeping_{0};
};

}  // namespace braid::transport
