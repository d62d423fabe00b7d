// The doorbell: one futex word per endpoint that peers (and the tcp progress thread) ring after
// they post or release, so a rank with nothing to do can sleep instead of spinning.
//
// Protocol (Dekker-style, no lost wake-ups):
//   sleeper: sleeping = 1 (seq_cst); ticket = word; re-check channels; FUTEX_WAIT(word, ticket)
//   ringer:  publish (release); seq_cst fence; if sleeping: ++word; FUTEX_WAKE(word)
// Either the ringer sees the flag and bumps the word (so the wait returns at once), or the
// sleeper's re-check sees the publication. The word may live in shared memory, so the futex calls
// are never FUTEX_PRIVATE.
#pragma once

#include <cstdint>

#include "braid/deadline.hpp"

namespace braid::transport {

/// Two 32-bit words on a cache line of their own; placed in shared memory or in private memory.
/// Zero-initialised memory is a valid idle doorbell.
struct alignas(64) Doorbell {
  uint32_t word = 0;      ///< ticket counter, incremented by every ring
  uint32_t sleeping = 0;  ///< 1 while the owner is between prepareSleep and the end of sleep
  char pad[56] = {};
};
static_assert(sizeof(Doorbell) == 64);

/// Rings unconditionally: bumps the word and wakes every waiter.
void ringDoorbell(Doorbell& bell);
/// Call after publishing a post/release: rings only if the owner announced it sleeps.
void ringDoorbellIfSleeping(Doorbell& bell);
/// Announces a sleep; returns the ticket for sleepOnDoorbell().
uint32_t prepareDoorbellSleep(Doorbell& bell);
/// Waits until the word differs from `ticket` (or a spurious wake-up), or `until`; then clears
/// the announcement.
void sleepOnDoorbell(Doorbell& bell, uint32_t ticket, Clock::time_point until);

}  // namespace braid::transport
