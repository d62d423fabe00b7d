#include "transport/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>

namespace braid::transport {
namespace {

long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word may be shared between processes.
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

void ringDoorbell(Doorbell& bell) {
  std::atomic_ref<uint32_t>(bell.word).fetch_add(1, std::memory_order_seq_cst);
  futex(&bell.word, FUTEX_WAKE, INT_MAX, nullptr);
}

void ringDoorbellIfSleeping(Doorbell& bell) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (std::atomic_ref<uint32_t>(bell.sleeping).load(std::memory_order_relaxed) != 0) {
    ringDoorbell(bell);
  }
}

uint32_t prepareDoorbellSleep(Doorbell& bell) {
  std::atomic_ref<uint32_t>(bell.sleeping).store(1, std::memory_order_seq_cst);
  // The caller's re-check of its channels must not move above the flag store (Dekker).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return std::atomic_ref<uint32_t>(bell.word).load(std::memory_order_seq_cst);
}

void sleepOnDoorbell(Doorbell& bell, uint32_t ticket, Clock::time_point until) {
  auto now = Clock::now();
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
