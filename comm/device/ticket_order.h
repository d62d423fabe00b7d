// Tickets finish in any order (a failure ends the ops queued behind the running one first); the
// callers' streams may pass ticket n only once 1..n all finished, since an op still running may
// still write its output. InOrderTickets turns finishes in any order into that one value.
// Pure, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <set>

namespace braid::comm::device {

class InOrderTickets {
 public:
  /// Notes `ticket` (from 1, each once) finished; returns the highest n with 1..n finished.
  uint64_t finish(uint64_t ticket) {
    if (ticket == done_ + 1) {
      ++done_;
      while (!ahead_.empty() && *ahead_.begin() == done_ + 1) {
        ahead_.erase(ahead_.begin());
        ++done_;
      }
    } else if (ticket > done_) {
      ahead_.insert(ticket);
    }
    return done_;
  }
  uint64_t done() const { return done_; }

 private:
  uint64_t done_ = 0;
  std::set<uint64_t> ahead_;  // finished before an earlier one
};

}  // namespace braid::comm::device
