// A cheap timestamp for per-operation records (the flight recorder, the status board): the CPU's
// time-stamp counter on x86-64 (a few ns to read where a clock read costs tens; invariant and
// shared by the processes of one host), else steady-clock ns. TickClock turns ticks into time.
#pragma once

#include <chrono>
#include <cstdint>

namespace braid {

inline int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t readTick() {
#if defined(__x86_64__)
  return static_cast<int64_t>(__builtin_ia32_rdtsc());
#else
  return steadyNs();
#endif
}

/// A tick and the steady clock read together at construction; ticksPerNs() is the rate measured
/// from then to now (1 without a time-stamp counter, or before any time passed).
class TickClock {
 public:
  TickClock() : tick0_(readTick()), ns0_(steadyNs()) {}
  double ticksPerNs() const {
    const int64_t ticks = readTick() - tick0_, ns = steadyNs() - ns0_;
    return ticks > 0 && ns > 0 ? static_cast<double>(ticks) / static_cast<double>(ns) : 1.0;
  }
  /// Nanoseconds from tick `t` to now.
  double nsSince(int64_t t) const { return static_cast<double>(readTick() - t) / ticksPerNs(); }

 private:
  int64_t tick0_, ns0_;
};

}  // namespace braid
