#include "comm/device/kernel_pieces.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace braid::comm::device {
namespace {

namespace kc = braid::kernels::cuda;

// A wait spins for its first 100 us, yields until 1 ms, then sleeps in 20 us steps. A command
// comes back in microseconds, and a sleep costs the timer's slack (tens of microseconds) on
// every sweep of an op; a device collective's host runs on a GPU machine's many cores, so
// spinning that long costs nobody a core.
class Pacer {
 public:
  Pacer() : start_(std::chrono::steady_clock::now()) {}
  void pause() {
    const auto waited = std::chrono::steady_clock::now() - start_;
    if (waited < std::chrono::microseconds(100)) return;
    if (waited < std::chrono::milliseconds(1)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

kc::ExecCommand command(kc::ExecKind kind, void* dst0, void* dst1, const void* a, const void* b,
                        size_t count, const ExecArgs& args, uint64_t divisor) {
  kc::ExecCommand c;
  c.kind = uint32_t(kind);
  c.dtype = uint8_t(args.dtype);
  c.op = uint8_t(args.op);
  c.count = count;
  c.divisor = divisor;
  c.dst0 = dst0;
  c.dst1 = dst1;
  c.a = a;
  c.b = b;
  return c;
}

}  // namespace

KernelPieces::KernelPieces(int rank, ExecRing& ring, unsigned blocks, double timeoutSeconds)
    : rank_(rank), ring_(ring), blocks_(std::max(1u, blocks)), timeoutSeconds_(timeoutSeconds) {}

void KernelPieces::post(kc::ExecCommand c, const void* const* srcs, size_t elemBytes,
                        const ExecArgs& args) {
  // About one chunk per block, at least 8 KiB (a block's 512 threads move 32 KiB per round of
  // their loop), in whole 64-element steps (16-byte vectors stay aligned from chunk to chunk).
  const uint64_t perBlock = (c.count + blocks_ - 1) / blocks_;
  const uint64_t floor = 8192 / elemBytes;
  c.chunkElems = (std::max(perBlock, floor) + 63) / 64 * 64;
  BRAID_ENFORCE(c.kind == uint32_t(kc::ExecKind::kCopy) || ring_.runs(args.dtype, args.op),
                ErrorCode::kInternal,
                "rank {}: {}: the executor kernel runs the op's type and op, or bytes; not {} {}",
                rank_, runner_->what(args), dataTypeName(args.dtype), redOpName(args.op));
  if (!ring_.slotFree(ring_.posted())) {
    const Deadline deadline = Deadline::after(args.timeoutSeconds);
    for (Pacer pacer; !ring_.slotFree(ring_.posted()); pacer.pause()) {
      if (deadline.expired()) {
        fail(ErrorCode::kTimeout,
             "rank {}: {}: the executor kernel did not free a ring slot in {} s (BRAID_TIMEOUT)",
             rank_, runner_->what(args), args.timeoutSeconds);
      }
    }
  }
  ring_.post(c, srcs);
}

void KernelPieces::move(const Piece& p, const ExecArgs& args) {
  const uint64_t divisor = p.divisor;
  const size_t es = dataTypeSize(args.dtype);
  using K = kc::ExecKind;
  // Operand order as the host pieces (slot first), so results are bit-identical.
  switch (p.prim) {
    case Prim::kSend:
      post(command(K::kCopy, p.out, nullptr, p.src, nullptr, p.bytes, args, 1), nullptr, 1, args);
      break;
    case Prim::kRecv:
      post(command(K::kCopy, p.dst, nullptr, p.slot, nullptr, p.bytes, args, 1), nullptr, 1, args);
      break;
    case Prim::kRecvReduce:
      post(command(K::kReduceCopy, p.dst, nullptr, p.slot, p.src, p.len, args, divisor), nullptr,
           es, args);
      break;
    case Prim::kRecvReduceSend:
      post(command(K::kReduceCopy, p.out, nullptr, p.slot, p.src, p.len, args, 1), nullptr, es,
           args);
      break;
    case Prim::kRecvReduceCopySend:
      post(command(K::kReduceCopy, p.dst, p.out, p.slot, p.src, p.len, args, divisor), nullptr, es,
           args);
      break;
    case Prim::kRecvCopySend:
      post(command(K::kCopy, p.dst, p.out, p.slot, nullptr, p.bytes, args, 1), nullptr, 1, args);
      break;
    case Prim::kCopy:
      if (divisor > 1) {
        post(command(K::kDivide, p.dst, nullptr, p.src, nullptr, p.len, args, divisor), nullptr, es,
             args);
      } else if (p.dst != p.src) {
        post(command(K::kCopy, p.dst, nullptr, p.src, nullptr, p.bytes, args, 1), nullptr, 1, args);
      }
      break;
    case Prim::kGatherReduce: {
      BRAID_ENFORCE(p.gatherCount >= 1 && p.gatherCount <= kc::kMaxSources,
                    ErrorCode::kInvalidUsage,
                    "rank {}: {}: the one-shot device reduce takes 1 to {} ranks", rank_,
                    runner_->what(args), kc::kMaxSources);
      kc::ExecCommand c =
          command(K::kReduceMany, p.dst, nullptr, nullptr, nullptr, p.len, args, divisor);
      c.nsrc = uint16_t(p.gatherCount);
      post(c, p.gatherSrcs, es, args);
      break;
    }
  }
}

bool KernelPieces::allDone() {
  while (waitFrom_ < ring_.posted() && ring_.isDone(waitFrom_)) ++waitFrom_;
  return waitFrom_ == ring_.posted();
}

void KernelPieces::finish(ProgramRunner& runner, const ExecArgs& args) {
  // Each command is bounded work for a running kernel (it runs: the op started only once its
  // executor said so), so this ends unless the GPU is lost; still bounded, and abort() is seen.
  const Deadline deadline = Deadline::after(args.timeoutSeconds);
  for (Pacer pacer; !allDone(); pacer.pause()) {
    if (runner.aborted()) {
      runner.failWaiting(ErrorCode::kAborted, args, "communicator aborted by this process");
    }
    if (deadline.expired()) {
      runner.failWaiting(
          ErrorCode::kTimeout, args,
          fmt::format("the executor kernel did not finish command {} in {} s (a kernel fault "
                      "stops it; BRAID_TIMEOUT)",
                      waitFrom_, args.timeoutSeconds));
    }
  }
}

void KernelPieces::abandon() {
  // Let posted commands end before buffers are given back (bounded: they are, unless the GPU
  // faulted, and then nothing more runs).
  const Deadline deadline = Deadline::after(timeoutSeconds_);
  for (Pacer pacer; !allDone() && !deadline.expired(); pacer.pause()) {
  }
}

}  // namespace braid::comm::device
