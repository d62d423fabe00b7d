// The doorbell's light ringing (transport/doorbell.h): a registered process rings with a compiler
// barrier only and the sleeper runs membarrier for it. These tests hunt the lost wake-up that a
// wrong argument would allow, between two processes as shm ranks are, and check that a forked
// child starts with full fences (it may not be registered).
#include <signal.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "tests/kit/processes.h"
#include "tests/support/skip.h"
#include "transport/doorbell.h"

namespace braid::transport {
namespace {

// Shared between the processes: the doorbell, the sleeper's announced round and what the ringer
// published, each on a line of its own.
struct Shared {
  Doorbell bell;
  alignas(64) std::atomic<uint64_t> sleeperRound{0};
  alignas(64) std::atomic<uint64_t> published{0};
  alignas(64) std::atomic<uint64_t> slowWakes{0};
  alignas(64) std::atomic<uint64_t> worstUs{0};
};

Shared* mapShared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared();
}

TEST(Doorbell, AForkedChildRingsWithFencesUntilItRegistersItself) {
  if (!enableLightRinging()) {
    BRAID_SKIP_NO_DEVICE("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) is unavailable "
                         "here (or BRAID_LIGHT_RINGING=0): this process rings with full fences");
  }
  EXPECT_TRUE(ringsLightly());
  pid_t child = testing::forkChild([] {
    if (ringsLightly()) return 1;          // inherited the flag without its own registration
    if (!enableLightRinging()) return 2;  // registers itself
    return ringsLightly() ? 0 : 3;
  });
  ASSERT_GT(child, 0);
  EXPECT_EQ(testing::waitChild(child, Deadline::after(10)), 0);
}

// Round after round the sleeper announces a sleep just as the ringer publishes and rings, with
// the ringer's publication delayed by a varying spin so that every interleaving comes up. A lost
// wake-up shows as a sleep that lasts until its deadline (2 s); the sleeper counts any over 1.5 s
// (a loaded machine may delay a real wake-up, never by that much).
TEST(Doorbell, NoWakeUpIsLostBetweenProcesses) {
  Shared* shared = mapShared();
  ASSERT_NE(shared, nullptr);
  constexpr uint64_t kRounds = 20000;
  enableLightRinging();  // before the fork; each child registers itself too, as endpoints do
  pid_t ringer = testing::forkChild([shared] {
    enableLightRinging();
    for (uint64_t round = 1; round <= kRounds; ++round) {
      while (shared->sleeperRound.load(std::memory_order_acquire) < round) {
      }
      for (uint64_t spin = 0; spin < (round * 7919) % 128; ++spin) asm volatile("" ::: "memory");
      shared->published.store(round, std::memory_order_release);
      ringDoorbellIfSleeping(shared->bell);
    }
    return 0;
  });
  ASSERT_GT(ringer, 0);
  pid_t sleeper = testing::forkChild([shared] {
    enableLightRinging();
    for (uint64_t round = 1; round <= kRounds; ++round) {
      shared->sleeperRound.store(round, std::memory_order_release);
      // Then about as long as the announcement takes to reach the ringer: its publication and
      // this announcement of the sleep fall within a cache miss of each other in many rounds.
      for (uint64_t spin = 0; spin < (round * 104729) % 512; ++spin) asm volatile("" ::: "memory");
      while (shared->published.load(std::memory_order_acquire) < round) {
        const uint32_t ticket = prepareDoorbellSleep(shared->bell);
        if (shared->published.load(std::memory_order_acquire) >= round) {
          sleepOnDoorbell(shared->bell, ticket, Clock::now());  // ends the announcement
          break;
        }
        const auto start = Clock::now();
        sleepOnDoorbell(shared->bell, ticket, start + std::chrono::seconds(2));
        const auto slept = std::chrono::duration_cast<std::chrono::microseconds>(
                               Clock::now() - start).count();
        if (uint64_t(slept) > shared->worstUs.load()) shared->worstUs.store(uint64_t(slept));
        if (slept > 1500000) {
          shared->slowWakes.fetch_add(1);
          return 3;  // lost: no need to lose every later round too
        }
      }
    }
    return 0;
  });
  ASSERT_GT(sleeper, 0);
  const int sleeperStatus = testing::waitChild(sleeper, Deadline::after(120));
  if (sleeperStatus != 0) kill(ringer, SIGKILL);  // it waits for rounds that never come
  EXPECT_EQ(sleeperStatus, 0);
  testing::waitChild(ringer, Deadline::after(10));
  EXPECT_EQ(shared->slowWakes.load(), 0u)
      << "wake-ups that came only at the sleep's deadline (lost); worst sleep "
      << shared->worstUs.load() << " us";
  RecordProperty("worst_sleep_us", std::to_string(shared->worstUs.load()));
  munmap(shared, sizeof(Shared));
}

}  // namespace
}  // namespace braid::transport
