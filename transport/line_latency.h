// How long a cache line the other end of a channel just wrote takes to reach this core.
//
// Why: where two ranks' cores share no cache (two dies of one CPU, two sockets), a slot payload
// written with ordinary stores sits dirty in the writer's cache, and the reader pulls it line by
// line across the dies: on the 2-vCPU dev VM, a 2-rank ring then moves 2.1 GB/s against 13-15 with
// a shared L3 (bench/RESULTS.md, issue 14). Written with streaming stores, the payload goes to
// memory and the reader streams it at memory speed (3.5-3.7x there); with a shared cache that
// detour halves the speed instead. The host vCPUs move between dies every few minutes, so only a
// measurement taken while running says which case holds.
//
// What is measured: a load of a line the peer writes, timed only when it returned a value the
// peer had changed since the last load (so the line came from the peer's core). A sample is
// stretched, never shortened, by preemption between the two clock reads or by the peer writing
// the line at that moment, so the least of the last few samples is the transfer time.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

namespace braid::transport {

class LineLatency {
 public:
  static constexpr int kWindow = 4;

  /// One timed load that brought a changed value: `nanos` between the clock reads around it.
  void add(uint64_t nanos) {
    samples_[next_] = static_cast<uint32_t>(std::min<uint64_t>(nanos, UINT32_MAX));
    next_ = (next_ + 1) % kWindow;
    if (seen_ < kWindow) ++seen_;
  }
  /// Whether kWindow samples were added (nanos() is known).
  bool full() const { return seen_ >= kWindow; }
  /// The least of the last kWindow samples, in ns; 0 (unknown) until kWindow were added.
  uint32_t nanos() const {
    if (seen_ < kWindow) return 0;
    return *std::min_element(samples_.begin(), samples_.end());
  }

 private:
  std::array<uint32_t, kWindow> samples_{};
  int next_ = 0;
  int seen_ = 0;
};

/// Times one load: `load()` runs between two steady-clock reads, and its value is returned; *nanos
/// gets the time between the reads. On x86 Linux the clock read (the vDSO's) is ordered after the
/// loads before it (lfence or rdtscp), so the second read waits for the load. Where it is not, a
/// sample can only come out short: the channel then looks near, and nothing changes.
template <typename Load>
auto timedLoad(Load load, uint64_t* nanos) {
  const auto t0 = std::chrono::steady_clock::now();
  auto value = load();
  const auto t1 = std::chrono::steady_clock::now();
  *nanos =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  return value;
}

}  // namespace braid::transport
