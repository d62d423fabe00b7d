// The progress thread's loop, the same for every network backend; the backend's hooks do the I/O.
//
// Round: [stopping: finishStopping() may end the loop] [a user waits: stand back]
//        [idle long enough: announce the sleep; no local work: sleep up to kSleepMillis]
//        waitForEvents(timeout); end the sleep; progress().
// No lost wake-up: work reaches this thread either as a network event (the fd the backend's
// waitForEvents polls stays readable until progress() takes it) or as a user's store followed by
// wakeProgress(). For the latter the protocol is ProgressWake's Dekker: the thread announces the
// sleep (seq_cst) before hasLocalWork() looks at the users' stores; a user stores, fences and
// kicks the eventfd if the announcement is visible. Either the check sees the store (no sleep) or
// the kick makes the fd readable (the sleep returns at once). Every sleep has a deadline
// (kSleepMillis, stopSleepMillis_ while stopping), so a mistake costs latency, never a hang.
#include <chrono>
#include <thread>

#include "transport/network/network_endpoint.h"

namespace braid::transport {

namespace {

constexpr int kSleepMillis = 100;  // a sleep ends at least this often (belt and braces)

}  // namespace

void NetworkEndpoint::progressLoop() {
  int idlePolls = 0;                              // rounds without activity
  Clock::time_point lastActivity = Clock::now();  // or the last sleep
  bool lastRoundDid = false;
  while (true) {
    // Read before this round's work: the rounds after the user asked us to stop still see
    // everything the user did before that (its last posts, its abort for the peers).
    const bool stop = stopping();
    if (stop && finishStopping(lastRoundDid)) break;
    if (!stop && standBack()) {
      std::this_thread::yield();
      continue;
    }
    const bool spun = idlePolls >= spin_.polls &&
                      (spin_.time.count() == 0 || Clock::now() - lastActivity >= spin_.time);
    int timeout = 0;
    if (spun) {
      wake_.announceSleep();
      if (!hasLocalWork() && !stopping_.load()) timeout = kSleepMillis;
      if (stop) timeout = stopSleepMillis_;
    }
    waitForEvents(timeout);
    wake_.endSleep();
    if (spun && spin_.time.count() != 0) lastActivity = Clock::now();  // spin again after a sleep
    lastRoundDid = progress();
    if (lastRoundDid) {
      idlePolls = 0;
      if (spin_.time.count() != 0) lastActivity = Clock::now();
    } else {
      ++idlePolls;
    }
  }
}

}  // namespace braid::transport
