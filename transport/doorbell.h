// The doorbell: one futex word per endpoint that peers (and the tcp progress thread) ring after
// they post or release, so a rank with nothing to do can sleep instead of spinning.
//
// Protocol (Dekker-style, no lost wake-ups):
//   sleeper: sleeping = 1 (seq_cst); heavy barrier; ticket = word; re-check channels;
//            FUTEX_WAIT(word, ticket)
//   ringer:  publish (release); light barrier; if sleeping: ++word; FUTEX_WAKE(word)
// Either the ringer sees the flag and bumps the word (so the wait returns at once), or the
// sleeper's re-check sees the publication. The word may live in shared memory, so the futex calls
// are never FUTEX_PRIVATE.
//
// The barriers are asymmetric. Ringers ring after every post and release, on the latency path;
// sleepers sleep only after a long idle spin. A full fence in the ringer (the obvious Dekker) costs
// a cross-core round trip per message, because it waits for the just-published line to leave the
// store buffer. So a process that could register with membarrier(2)
// (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, done once by enableLightRinging() before any
// endpoint connects) rings with a compiler barrier only, and the sleeper pays instead:
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) makes every thread of every registered process run
// a full barrier (or pass a context switch, which is one) before it returns. Why that suffices:
// a ringer's load of `sleeping` either comes after its barrier point, so it sees the flag stored
// before the call, or before it, and then its earlier publication was drained by that barrier
// before the call returned, so the sleeper's re-check sees it. A process that could not register
// keeps the full fence; a sleeper whose membarrier call fails sleeps in slices of at most 1 ms,
// so a wake-up lost to a light ringer costs at most that.
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

/// Registers this process for the sleepers' heavy barrier (membarrier), once; from then on its
/// threads ring with a compiler barrier only. Call before the first endpoint connects, so no peer
/// sleeps on a ring of ours from before the registration. BRAID_LIGHT_RINGING=0 keeps the fence.
/// Returns whether this process rings lightly. A forked child rings with fences until it calls
/// this itself (it may not be registered).
bool enableLightRinging();
/// Whether this process rings with a compiler barrier only (for tests and diagnostics).
bool ringsLightly();
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
