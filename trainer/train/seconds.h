// The trainers' wall-clock timing: a steady clock and the seconds since a point of it.
#pragma once

#include <chrono>

namespace braid::trainer {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace braid::trainer
