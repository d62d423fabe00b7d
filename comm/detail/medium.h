// What differs between a communicator over host memory and one over device memory, around the
// one op queue and engine they share (comm/detail/state.h): the buffer checks at the call, the
// scratch bytes barriers and completion exchanges move, who runs queued ops, and what happens
// around each op. The host's is here; the device's (comm/device/device_medium.h) orders ops with
// the callers' CUDA streams.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "braid/braid.hpp"
#include "comm/detail/op_plan.h"

namespace braid::comm {

class Medium {
 public:
  virtual ~Medium() = default;

  /// The buffer checks of a call with count > 0 that passed comm::validateOp (`inBytes` and
  /// `outBytes` are this rank's buffer sizes). Throws kInvalidUsage naming rank, collective and
  /// buffer; touches nothing.
  virtual void checkBuffers(const OpDesc& d, size_t inBytes, size_t outBytes) const = 0;
  /// One byte each, in this medium's memory, for barriers and completion exchanges (only the
  /// thread running ops uses them).
  virtual void* scratchIn() = 0;
  virtual void* scratchOut() = 0;

  /// True (host): a caller that waits runs queued ops itself, the progress thread only what
  /// nobody waits for, after a grace period, and point-to-point ops queued together run as one
  /// group. False (device): callers never wait on a Request (their streams do), so the progress
  /// thread runs every op at once, one after the other.
  virtual bool callersRun() const { return true; }
  /// True: a call's schedule is chosen when it is made, so a forced algorithm that cannot run it
  /// is a usage error at the call (the device's calls cannot report it later but asynchronously).
  virtual bool planAtCall() const { return false; }

  /// On the progress thread, once, before it runs anything.
  virtual void progressThreadStarted() {}
  /// Before a queued op runs (on the thread that runs it): the device waits for the work its
  /// caller's stream had before the call, ending early when `aborted` is set. Throws to fail the
  /// op (and break the communicator).
  virtual void beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) {
    (void)ticket;
    (void)aborted;
  }
  /// Exactly once per queued op with a ticket, whatever its outcome, possibly under the queue's
  /// lock: the device releases the callers' streams that wait for it.
  virtual void finished(uint64_t ticket) { (void)ticket; }
  /// A failure seen outside any op, which breaks the communicator from then on (the device: a
  /// caller's stream stopped waiting at its bound and ran on without the collective).
  virtual std::optional<Error> failureOutsideOps() const { return std::nullopt; }
};

/// Host memory: null checks and overlap; barriers use two bytes of the state.
class HostMedium final : public Medium {
 public:
  explicit HostMedium(int rank) : rank_(rank) {}
  void checkBuffers(const OpDesc& d, size_t inBytes, size_t outBytes) const override;
  void* scratchIn() override { return &in_; }
  void* scratchOut() override { return &out_; }

 private:
  int rank_;
  uint8_t in_ = 0, out_ = 0;
};

}  // namespace braid::comm
