// SIGUSR1: every live communicator of this process logs its stuck-rank report
// (Communicator::statusReport). The handler only writes a byte to a pipe (async-signal-safe); a
// thread of braid's reads it and logs the reports. Installed at the first communicator's
// connect, and only where SIGUSR1 still has its default action (a program that handles SIGUSR1
// keeps its handler) and BRAID_STATUS_SIGNAL is not 0.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/detail/live_comms.h"
#include "comm/detail/state.h"
#include "common/env.h"
#include "common/log.h"

namespace braid {
namespace {

struct Registry {
  std::mutex mutex;
  int pipe[2] = {-1, -1};
  bool installed = false;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the reporter thread outlives main()
  return *r;
}

void onSignal(int) {
  const int saved = errno;
  const char byte = 1;
  // Nothing to do if the pipe is full: a report is already due.
  [[maybe_unused]] ssize_t n = ::write(registry().pipe[1], &byte, 1);
  errno = saved;
}

void reporter() {
  Registry& r = registry();
  for (;;) {
    char buf[64];
    const ssize_t n = ::read(r.pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (auto& s : liveComms()) BRAID_WARN("SIGUSR1: {}", s->statusReport());
  }
}

// A forked child has no reporter thread: it starts over at its first communicator (the mutex is
// not held across fork: registerForStatusSignal takes it only briefly, and fork() in a thread
// that holds it cannot happen in braid).
void forgetAfterFork() {
  Registry& r = registry();
  if (r.pipe[0] >= 0) ::close(r.pipe[0]);
  if (r.pipe[1] >= 0) ::close(r.pipe[1]);
  r.pipe[0] = r.pipe[1] = -1;
  r.installed = false;
}

bool installOnce(Registry& r) {
  if (r.installed) return true;
  if (envInt("BRAID_STATUS_SIGNAL", 1) == 0) return false;
  struct sigaction current {};
  // The default action, or ours inherited across fork (the program's own handler stays).
  if (sigaction(SIGUSR1, nullptr, &current) != 0 ||
      (current.sa_handler != SIG_DFL && current.sa_handler != onSignal)) {
    return false;
  }
  static const bool atfork = ::pthread_atfork(nullptr, nullptr, forgetAfterFork) == 0;
  (void)atfork;
  if (::pipe2(r.pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  // The reader blocks; the writer (the handler) never does.
  ::fcntl(r.pipe[0], F_SETFL, ::fcntl(r.pipe[0], F_GETFL) & ~O_NONBLOCK);
  std::thread(reporter).detach();
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &action, nullptr) != 0) return false;
  r.installed = true;
  return true;
}

}  // namespace

void registerForStatusSignal(const std::weak_ptr<CommState>& state) {
  registerLive(state);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  installOnce(r);
}

}  // namespace braid
