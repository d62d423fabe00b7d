#include "transport/doorbell.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>

#include "common/env.h"

namespace braid::transport {
namespace {

long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word may be shared between processes.
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

// Set once this process is registered for the sleepers' heavy barrier (doorbell.h). A forked
// child is a new process that may not be registered: it starts with full fences again.
std::atomic<bool> lightRinging{false};
// Cleared the first time a sleeper's heavy barrier fails: its sleeps are then capped.
std::atomic<bool> heavyBarrierWorks{true};
constexpr auto kUnsureSleep = std::chrono::milliseconds(1);

void forgetRegistrationInChild() { lightRinging.store(false, std::memory_order_relaxed); }

}  // namespace

bool enableLightRinging() {
  static std::once_flag atFork;
  std::call_once(atFork, [] { pthread_atfork(nullptr, nullptr, forgetRegistrationInChild); });
  if (lightRinging.load(std::memory_order_acquire)) return true;
  if (envInt("BRAID_LIGHT_RINGING", 1) == 0) return false;
  const long commands = membarrier(MEMBARRIER_CMD_QUERY);
  if (commands < 0 || (commands & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
  if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) return false;  // idempotent
  lightRinging.store(true, std::memory_order_seq_cst);
  return true;
}

bool ringsLightly() { return lightRinging.load(std::memory_order_relaxed); }

void ringDoorbell(Doorbell& bell) {
  std::atomic_ref<uint32_t>(bell.word).fetch_add(1, std::memory_order_seq_cst);
  futex(&bell.word, FUTEX_WAKE, INT_MAX, nullptr);
}

void ringDoorbellIfSleeping(Doorbell& bell) {
  if (lightRinging.load(std::memory_order_relaxed)) {
    // The sleeper's membarrier orders this thread's publication before the load below.
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (std::atomic_ref<uint32_t>(bell.sleeping).load(std::memory_order_relaxed) != 0) {
    ringDoorbell(bell);
  }
}

uint32_t prepareDoorbellSleep(Doorbell& bell) {
  std::atomic_ref<uint32_t>(bell.sleeping).store(1, std::memory_order_seq_cst);
  // The caller's re-check of its channels must not move above the flag store (Dekker), and a
  // light ringer's publication must be visible by then: its barrier is ours to run.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (heavyBarrierWorks.load(std::memory_order_relaxed) &&
      membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
    heavyBarrierWorks.store(false, std::memory_order_relaxed);
  }
  return std::atomic_ref<uint32_t>(bell.word).load(std::memory_order_seq_cst);
}

void sleepOnDoorbell(Doorbell& bell, uint32_t ticket, Clock::time_point until) {
  auto now = Clock::now();
  // Without the heavy barrier a light ringer's ring may be missed: look again soon.
  if (!heavyBarrierWorks.load(std::memory_order_relaxed)) until = std::min(until, now + kUnsureSleep);
  if (until > now) {
    // Cap one wait at an hour so the arithmetic never overflows; callers loop anyway.
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now);
    left = std::min<std::chrono::nanoseconds>(left, std::chrono::hours(1));
    timespec ts;
    ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
    futex(&bell.word, FUTEX_WAIT, ticket, &ts);  // EAGAIN / ETIMEDOUT / EINTR are all fine
  }
  std::atomic_ref<uint32_t>(bell.sleeping).store(0, std::memory_order_relaxed);
}

}  // namespace braid::transport
