// The host side of the executor kernel's channel (kernels/cuda/executor.h: the protocol): the
// command ring in host-mapped memory, the kernel's per-slot claim words and per-launch exit
// counts in device memory, and what the progress thread does with them: name the running op,
// post commands, see them done. Past construction no method calls CUDA (host_words.h says why).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/executor.h"

namespace braid::comm::device {

class ExecRing {
 public:
  /// On the current device; `launches`: exit counts, one per ready word. Throws kCudaError.
  ExecRing(int rank, size_t launches);
  ~ExecRing();
  ExecRing(const ExecRing&) = delete;
  ExecRing& operator=(const ExecRing&) = delete;

  /// The op `ticket`, of element type `type` and op `op`, runs now (its executor has started):
  /// its commands follow.
  void beginOp(uint64_t ticket, DataType type, RedOp op);
  /// Whether the running op's executor can carry out a command of `type` and `op`: the op's own
  /// (kAvg as kSum), or bytes (uint8) with any op, as the one-byte exchanges that end some ops.
  bool runs(DataType type, RedOp op) const;
  /// Whether slot `seq % kExecRing` may take command `seq` (its previous command is done).
  bool slotFree(uint64_t seq) const;
  /// Writes `c` (and `srcs` for kReduceMany) as the next command of the running op, numbered
  /// posted(), then publishes it. Needs slotFree(posted()).
  void post(kernels::cuda::ExecCommand c, const void* const* srcs);
  /// Commands posted so far (the next one's number).
  uint64_t posted() const { return posted_; }
  /// Whether command `seq` is done.
  bool isDone(uint64_t seq) const;

  /// The executor's arguments for an op with ready word `word` (device addresses).
  kernels::cuda::ExecParams params(uint64_t ticket, DataType type, RedOp op, uint32_t* readyWord,
                                   uint32_t* flag, size_t word, uint64_t maxIdleNanos) const;

 private:
  int rank_;
  kernels::cuda::ExecChannel* host_ = nullptr;     // host-mapped
  kernels::cuda::ExecChannel* device_ = nullptr;   // its device address
  kernels::cuda::ExecSlotWords* slots_ = nullptr;  // device memory
  uint32_t* exited_ = nullptr;                     // device memory, one per launch word
  uint64_t ticket_ = 0;
  DataType type_ = DataType::kUint8;
  RedOp op_ = RedOp::kSum;
  uint64_t posted_ = 0;
};

}  // namespace braid::comm::device
