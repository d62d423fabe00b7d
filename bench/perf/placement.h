// The placement probe: how far apart the CPUs of ranks 0 and 1 are, measured as the round trip
// of one cache line between them (on the 2-vCPU VM ~60 ns when they share an L3 cache, ~330 ns
// across dies, and the host moves the vCPUs every few minutes: issue 14). Ranks 0 and 1 on one
// host share one page (POSIX shared memory named by rank 0) and bounce a counter in it; the
// other ranks take no part. The driver probes before every size and after the last one, and
// prints and records what it saw, so every figure comes with the placement it was measured in.
#pragma once

#include <cstdint>

#include "bench/perf/world.h"

namespace braid::bench {

class PlacementProbe {
 public:
  /// Collective over the world's helper communicator. Maps the page on ranks 0 and 1 when they
  /// share a host; otherwise (one rank, two hosts, no shared memory) every measure() says -1.
  explicit PlacementProbe(World& world);
  ~PlacementProbe();
  PlacementProbe(const PlacementProbe&) = delete;
  PlacementProbe& operator=(const PlacementProbe&) = delete;

  /// Ranks 0 and 1 call it together (every rank may: the others return -1 at once). Returns, on
  /// rank 0, the median over batches of the mean round trip in ns; -1 elsewhere, when not
  /// measurable, or when the peer did not answer within a second (the probe then stays off).
  double measure();
  /// The CPUs ranks 0 and 1 ran on at the last measure() (rank 0's view; -1 when unknown).
  int cpu0() const { return cpu0_; }
  int cpu1() const { return cpu1_; }

 private:
  struct Page;
  int rank_ = 0;
  Page* page_ = nullptr;
  uint64_t ball_ = 0;  // the counter's value after the last complete round trip
  bool off_ = true;
  int cpu0_ = -1, cpu1_ = -1;
};

}  // namespace braid::bench
