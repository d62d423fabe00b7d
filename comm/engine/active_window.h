// How long a wait stays active (spinning, or yielding when ranks outnumber cores) before it
// sleeps on the doorbell: adapted to the waits this runner has seen.
//
// Why adapt: an active wait pays off only when the peer answers inside the window; when waits
// last longer (a 1 Gbit/s link delivering a 1 MiB piece in ~8 ms, a peer still computing), every
// wait burns the whole window first, and on a machine whose ranks share cores that CPU is taken
// from the very ranks being waited for. 4 namespace hosts x 2 ranks on 2 cores ran the
// hierarchical all-reduce at 0.75 of the link bound with a fixed 2 ms window and 0.99 sleeping at
// once (bench/RESULTS.md), while shared-memory latency needs the window (a sleep and a wake cost
// tens of microseconds).
//
// Only where ranks outnumber the cores they share (`adapts`): a rank with a core of its own burns
// nothing another rank needs, while a long wait there (its peer preempted) would make later short
// waits sleep and pay a wake-up each.
//
// The rule, per finished wait: one that ended inside the window keeps it; one that slept but
// ended within the longest window (`longest`, BRAID_SPIN_US) would have been caught by a longer
// one, so the window doubles; one that outlasted even the longest halves it. So the window
// shrinks only while waits are longer than any window could serve, and grows back as soon as
// they are short again. Never below `kShortest` (then it grows by doubling) and never above
// `longest`; a `longest` of 0 never spins.
#pragma once

#include <algorithm>
#include <chrono>

namespace braid::comm {

class ActiveWindow {
 public:
  using Duration = std::chrono::steady_clock::duration;
  static constexpr Duration kShortest = std::chrono::microseconds(1);

  ActiveWindow(Duration longest, bool adapts)
      : longest_(longest), window_(longest), adapts_(adapts) {}

  Duration window() const { return window_; }

  /// A wait ended after `waited` (from its first idle round to progress); `slept`: it went past
  /// the window into the doorbell's sleep.
  void ended(Duration waited, bool slept) {
    if (!adapts_ || !slept || longest_ <= Duration::zero()) return;
    window_ = waited <= longest_ ? std::min(longest_, window_ * 2)
                                 : std::max(std::min(kShortest, longest_), window_ / 2);
  }

 private:
  Duration longest_;
  Duration window_;
  bool adapts_;
};

}  // namespace braid::comm
