#include "braid/deadline.hpp"

#include <climits>
#include <cmath>

#include "common/env.h"

namespace braid {

Deadline Deadline::after(double seconds) {
  if (!(seconds < 1e9)) return never();
  auto delta = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return Deadline(Clock::now() + delta);
}

double Deadline::secondsLeft() const {
  if (when_ == Clock::time_point::max()) return 1e18;
  double left = std::chrono::duration<double>(when_ - Clock::now()).count();
  return left > 0 ? left : 0;
}

int Deadline::millisLeft() const {
  double ms = std::ceil(secondsLeft() * 1000.0);
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

double defaultTimeoutSeconds() {
  double value = envDouble("BRAID_TIMEOUT", 60.0);
  BRAID_ENFORCE(value > 0, ErrorCode::kInvalidUsage,
                "BRAID_TIMEOUT must be a positive number of seconds, got '{}'", value);
  return value;
}

}  // namespace braid
