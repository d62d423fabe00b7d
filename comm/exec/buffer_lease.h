// One rank's buffers lent, for one op, to the ranks that are threads of the same process: the
// single copy (single_copy.h) reads their inputs and writes their outputs by address. A rank that
// fails or is aborted returns from its call early, its caller may free the buffers, and a peer's
// late store would then corrupt this process's heap (a peer in another process never writes
// into ordinary memory, and its stores into memAlloc buffers land in pages its own mapping keeps
// alive). The lease makes "no peer touches my buffers once I return" hold for threads too.
//
// Why it holds: the owner opens a new epoch before it publishes its buffers' addresses, so a
// peer that knows the addresses also knows the epoch; a peer borrows only while that epoch is
// open (both under the mutex); the owner closes the epoch before it returns and waits until every
// borrower has given the lease back. So once close() returns, no peer touches the buffers and none
// can start to. The wait is short: a borrower holds the lease only across a copy loop that never
// blocks (single_copy.cc: borrowed per phase, not across its exchanges), and it looks at
// closing() between blocks, so the owner waits at most one block's copy per borrower.
//
// Every rank's lease lives in a registry of this process by (job id, rank): the owner and its
// peers hold it by shared pointer, so a peer's pointer stays valid after the owner's communicator
// is gone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace braid::comm {

class BufferLease {
 public:
  /// The lease of rank `rank` of job `jobId` in this process: created by the first to ask.
  static std::shared_ptr<BufferLease> of(const std::string& jobId, int rank);

  /// Owner: lends this op's buffers; returns the epoch peers borrow with. Not while open.
  uint64_t open();
  /// Owner: ends the loan (a no-op when not open); returns once no peer holds it. `rank` names
  /// the owner in the warning a wait longer than `warnAfterSeconds` logs.
  void close(int rank, double warnAfterSeconds);
  bool isOpen() const;

  /// Peer: borrows the buffers of `epoch`; false when the owner has left that op.
  bool borrow(uint64_t epoch);
  /// Peer: done with them (after a successful borrow).
  void giveBack();
  /// Peer, between blocks: the owner is leaving, stop touching its buffers.
  bool closing() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable returned_;
  std::atomic<uint64_t> epoch_{0};  // the open epoch, 0: closed (written under mutex_)
  uint64_t lastEpoch_ = 0;
  int borrowers_ = 0;
};

}  // namespace braid::comm
