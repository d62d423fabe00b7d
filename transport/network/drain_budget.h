// How long destroying a network endpoint (tcp, ucx) keeps at delivering what was posted: a step
// (about a second) at first; every time the peers take data, another step from then on, but never
// past the endpoint's timeout, and after an abort not past the first step (the data no longer
// matters). So a frozen peer costs one step, a slow but moving one is served up to the timeout,
// and destroy never hangs.
#pragma once

#include "braid/deadline.hpp"

namespace braid::transport {

class DrainBudget {
 public:
  /// Gives up after `stepSeconds` without progress, and never extends past `limit`
  /// (NetworkEndpoint::drainLimit(): the timeout from the destroy on, or now after an abort).
  DrainBudget(double stepSeconds, Deadline limit)
      : step_(stepSeconds), limit_(limit), until_(Deadline::after(step_)) {}

  /// The peers took data: another step from now, up to the limit.
  void progressed() {
    const Deadline extended = Deadline::after(step_).earlier(limit_);
    if (extended.when() > until_.when()) until_ = extended;
  }
  bool expired() const { return until_.expired(); }

 private:
  double step_;
  Deadline limit_;
  Deadline until_;
};

}  // namespace braid::transport
