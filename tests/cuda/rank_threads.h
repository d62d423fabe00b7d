// What tests with ranks as threads of one process on one GPU must respect, and which
// collectives a forced algorithm runs.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

#include "braid/types.hpp"

namespace braid::cudatest {

/// While a DeferFrees exists, Device buffers are freed when it ends instead of when they go.
/// Ranks that are threads of one process must not cudaFree while a peer's collective may be in
/// flight: cudaFree synchronises the device holding the driver's context lock, and the peer's
/// progress thread needs that lock to launch the kernels its collective waits for (a deadlock,
/// seen on an H100 2026-11-27). runDeviceRanks holds one around the rank threads.
class DeferFrees {
 public:
  DeferFrees() {
    std::lock_guard<std::mutex> lock(mutex());
    active() = true;
  }
  ~DeferFrees() {
    std::lock_guard<std::mutex> lock(mutex());
    for (void* p : pending()) cudaFree(p);
    pending().clear();
    active() = false;
  }
  DeferFrees(const DeferFrees&) = delete;
  DeferFrees& operator=(const DeferFrees&) = delete;

  /// Frees `p` now, or when the active DeferFrees ends.
  static void free(void* p) {
    {
      std::lock_guard<std::mutex> lock(mutex());
      if (active()) {
        pending().push_back(p);
        return;
      }
    }
    cudaFree(p);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static bool& active() {
    static bool on = false;
    return on;
  }
  static std::vector<void*>& pending() {
    static std::vector<void*> list;
    return list;
  }
};

/// Whether a collective runs under a forced algorithm (the tuner refuses the others): ring runs
/// the unrooted reductions and all-gather, chain the rooted ones, pairwise all-to-all alone;
/// oneshot and auto run all.
inline bool algorithmRuns(Algorithm algo, Collective coll) {
  const bool rooted = coll == Collective::kReduce || coll == Collective::kBroadcast;
  if (algo == Algorithm::kRing) return !rooted;
  if (algo == Algorithm::kChain) return rooted;
  if (algo == Algorithm::kPairwise) return coll == Collective::kAllToAll;
  return true;
}

}  // namespace braid::cudatest
