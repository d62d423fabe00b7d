// ThreadSanitizer cannot see that two mappings of one shared-memory page are the same memory: each
// rank maps its peers' inboxes at addresses of its own, so a release store through one mapping
// and the acquire load through another are, to TSan, two unrelated atomics. Ranks that are
// threads of one process then read each other's buffers directly (the single-copy all-reduce) with
// no happens-before edge TSan knows of, though the slot protocol orders them. Under TSan only, a
// post releases and a successful peek acquires a process-local address named by the ring (job,
// sender, receiver; the consumed counter on another), which gives TSan the edge the hardware
// already has. Elsewhere these are empty.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#if defined(__SANITIZE_THREAD__)
#define BRAID_TSAN_EDGES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRAID_TSAN_EDGES 1
#endif
#endif

#ifdef BRAID_TSAN_EDGES
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace braid::transport::shm {

/// The ring from `sender` to `receiver` of job `jobId` (the same on both ends); the id ^ 1 names
/// its consumed counter instead of its slots.
inline uint64_t ringEdgeId(const std::string& jobId, int sender, int receiver) {
  return (std::hash<std::string>{}(jobId) ^ (uint64_t(sender) << 24) ^ (uint64_t(receiver) << 4)) &
         ~uint64_t{1};
}

#ifdef BRAID_TSAN_EDGES
inline void* edgeAddress(uint64_t id) {
  static char table[1 << 16];  // collisions only add edges
  return &table[id % sizeof table];
}
inline void edgeRelease(uint64_t id) { __tsan_release(edgeAddress(id)); }
inline void edgeAcquire(uint64_t id) { __tsan_acquire(edgeAddress(id)); }
#else
inline void edgeRelease(uint64_t) {}
inline void edgeAcquire(uint64_t) {}
#endif

}  // namespace braid::transport::shm
