// The executor kernel: one launch per device collective, on the caller's stream, that moves the
// collective's pieces as a host thread posts them, so that the host thread itself never calls
// CUDA (comm/device/README.md says why it must not). Needs no CUDA headers.
//
// The host writes commands into a ring in host-mapped memory (ExecChannel) and the kernel's
// blocks read them over the bus. Every command is split into chunks that blocks claim one at a
// time (a claim word tagged with the command's number), so the work spreads over whichever blocks
// are resident and a block the GPU has not scheduled yet holds nothing up. The block that finishes
// a command's last chunk writes the command's number + 1 into its done word (one writer per
// command, so a done word never goes back). The kernel ends once the op has ended: the completion
// flag (comm/device/completion.h) reached its ticket.
//
// Why it is sound:
// - Seen in order: the host writes a command whole, then raises `posted` (release); a block reads
//   `posted` (acquire), then the command. The host rewrites ring slot s % kExecRing only after
//   command s - kExecRing is done, and as a sequence lock: `seal` 0 first, the fields, then
//   `seal` = s + 1; a block takes a copy only if it read the same seal, matching the copy's
//   number, before and after it (else the slot was being rewritten: it reads again).
// - Claimed once: a claim word holds (command number << 24 | chunks claimed); a block claims with
//   compare-and-swap only while the number is its command's and chunks remain, so a block that
//   lags behind (its command long done, the slot reused) claims nothing.
// - Visible before reported: each block fences its chunk's writes (device scope) before counting
//   it; the last one fences system-wide before the done word, which the host reads (acquire)
//   before it tells a peer that a slot is full. Loads go to L2 (element_loops.cuh): a kernel that
//   lives across many commands must not read a line cached for an earlier one.
// - Every wait is bounded: a block that sees no new command and no end of its op for maxIdleNanos
//   gives up, sets flag word 1 (the communicator reports it) and exits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/element_ops.h"  // BRAID_HOST_DEVICE

namespace braid::kernels::cuda {

/// What a command asks for (reduce.cu's and reduce_many.cu's operations).
enum class ExecKind : uint32_t {
  kCopy = 1,        ///< dst0 (and dst1 unless null) = a; `count` bytes
  kReduceCopy = 2,  ///< dst0 (and dst1) = a op b, divided when divisor > 1
  kDivide = 3,      ///< dst0 = a / divisor
  kReduceMany = 4,  ///< dst0 = srcs[0] op ... op srcs[nsrc - 1], divided when divisor > 1
};

/// Ring slots: commands posted and not yet done at any time.
constexpr uint32_t kExecRing = 64;

/// One command, as the host writes it into host-mapped memory.
struct alignas(64) ExecCommand {
  uint64_t ticket = 0;  ///< the op's ticket
  uint64_t seq = 0;     ///< the command's number on this channel (0, 1, 2, ... across ops)
  uint32_t kind = 0;    ///< ExecKind
  uint8_t dtype = 0;    ///< DataType
  uint8_t op = 0;       ///< RedOp (kAvg reduces as kSum)
  uint16_t nsrc = 0;    ///< kReduceMany: sources in the slot's srcs
  uint64_t count = 0;   ///< elements (kCopy: bytes)
  /// Elements per chunk (a multiple of 64): chunks = ceil(count / chunkElems), at least 1.
  uint64_t chunkElems = 0;
  uint64_t divisor = 1;
  void* dst0 = nullptr;
  void* dst1 = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  uint64_t seal = 0;  ///< seq + 1 once the slot is whole; 0 while the host writes it
};

/// The host-mapped channel of one communicator.
struct ExecChannel {
  alignas(64) uint64_t owner = 0;             ///< the ticket of the op now running (host)
  alignas(64) uint64_t firstSeq = 0;          ///< the number of that op's first command (host)
  alignas(64) uint64_t posted = 0;            ///< commands posted so far (host, release)
  alignas(64) uint64_t done[kExecRing] = {};  ///< slot s % kExecRing: s + 1 once command s is done
  ExecCommand cmd[kExecRing];
  const void* srcs[kExecRing][kMaxSources] = {};
};

/// Device memory of one channel (zeroed once): the claim and count words per ring slot.
struct ExecSlotWords {
  unsigned long long claim[kExecRing];
  unsigned long long completed[kExecRing];
};

/// Values the kernel writes into the op's ready word.
constexpr uint32_t kExecStarted = 1;  ///< the caller's earlier work is done; the kernel runs
constexpr uint32_t kExecExited = 2;   ///< every block has left; the word may serve another op

struct ExecParams {
  ExecChannel* channel = nullptr;  ///< its device address (cudaHostGetDevicePointer)
  ExecSlotWords* slots = nullptr;  ///< device memory
  uint32_t* exited = nullptr;      ///< device memory, zero: blocks that left (reset by the last)
  uint32_t* ready = nullptr;       ///< device address of the op's host-mapped ready word
  uint32_t* flag = nullptr;        ///< the completion flag's device address ([1]: gave up)
  uint64_t ticket = 0;
  uint64_t maxIdleNanos = 0;
  uint8_t dtype = 0;  ///< the instance's DataType and RedOp (kAvg as kSum); other commands must
  uint8_t op = 0;     ///< be uint8 (the one-byte exchanges that end some ops), run as such
};

/// Enqueues the executor for one op of element type `type` and op `op` (every command of the op
/// has them; kAvg runs as kSum, the divisor finalizes) on `stream` with `blocks` blocks. Returns
/// the launch's cudaError_t as int (0 when enqueued).
int launchExecutor(const ExecParams& params, unsigned blocks, DataType type, RedOp op,
                   void* stream);

/// Loads every instance of the executor into the current context now (see loadAllKernels()).
/// Returns the cudaError_t as int.
int loadExecutor();

/// The executor's threads per block, and the most registers per thread any instance uses
/// (cudaFuncGetAttributes), or -1 when unknown: for sizing grids that fit on the GPU together.
constexpr int kExecThreads = 512;
int executorRegisters();

/// The number of chunks of a command (at least 1).
BRAID_HOST_DEVICE inline uint64_t execChunks(const ExecCommand& c) {
  const uint64_t n = (c.count + c.chunkElems - 1) / c.chunkElems;
  return n == 0 ? 1 : n;
}

}  // namespace braid::kernels::cuda
