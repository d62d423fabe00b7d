#include "comm/device/cuda_pieces.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <sched.h>

#include <thread>

#include "kernels/cuda/cuda_kernels.h"

namespace braid::comm::device {
namespace {

namespace kc = braid::kernels::cuda;

// The stream wait: spin, then yield, then sleep in 20 us steps (kernels of one piece are short).
constexpr int kStreamSpinRounds = 64;

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

CudaPieces::CudaPieces(int rank, void* stream, double timeoutSeconds)
    : rank_(rank),
      stream_(stream),
      timeoutSeconds_(timeoutSeconds),
      done_(rank, 1, "the stream signal") {}

CudaPieces::~CudaPieces() = default;

uint32_t CudaPieces::signal(int* err) {
  uint32_t value = sent_ + 1;
  if (value == 0) value = 1;  // 0 means "none" (wraps after 2^32 sweeps)
  *err = done_.signal(stream_, 0, value);
  if (*err != 0) return 0;
  sent_ = value;
  return value;
}

bool CudaPieces::arrived(uint32_t value) const { return done_.load(0) == value; }

void CudaPieces::launched(int err, const char* kernel, const ExecArgs& args) const {
  if (err != 0) {
    fail(ErrorCode::kCudaError, "rank {}: {}: launching {} failed: {} ({})", rank_,
         runner_->what(args), kernel, kc::errorString(err), err);
  }
}

void CudaPieces::move(const Piece& p, const ExecArgs& args) {
  void* st = stream_;
  const uint64_t divisor = p.divisor;
  // Operand order as the host pieces (slot first), so results are bit-identical.
  switch (p.prim) {
    case Prim::kSend:
      launched(kc::copyAsync(p.out, nullptr, p.src, p.bytes, st), "copy", args);
      break;
    case Prim::kRecv:
      launched(kc::copyAsync(p.dst, nullptr, p.slot, p.bytes, st), "copy", args);
      break;
    case Prim::kRecvReduce:
      launched(kc::reduceCopyAsync(p.dst, nullptr, p.slot, p.src, p.len, args.dtype, args.op,
                                   divisor, st),
               "reduce", args);
      break;
    case Prim::kRecvReduceSend:
      launched(
          kc::reduceCopyAsync(p.out, nullptr, p.slot, p.src, p.len, args.dtype, args.op, 1, st),
          "reduce", args);
      break;
    case Prim::kRecvReduceCopySend:
      launched(
          kc::reduceCopyAsync(p.dst, p.out, p.slot, p.src, p.len, args.dtype, args.op, divisor, st),
          "reduce-copy", args);
      break;
    case Prim::kRecvCopySend:
      launched(kc::copyAsync(p.dst, p.out, p.slot, p.bytes, st), "copy", args);
      break;
    case Prim::kCopy:
      if (divisor > 1) {
        launched(kc::divideAsync(p.dst, p.src, p.len, args.dtype, divisor, st), "divide", args);
      } else if (p.dst != p.src) {
        launched(kc::copyAsync(p.dst, nullptr, p.src, p.bytes, st), "copy", args);
      }
      break;
    case Prim::kGatherReduce:
      BRAID_ENFORCE(p.gatherCount <= kc::kMaxSources, ErrorCode::kInvalidUsage,
                    "rank {}: {}: the one-shot device reduce takes at most {} ranks", rank_,
                    runner_->what(args), kc::kMaxSources);
      launched(kc::reduceManyAsync(p.dst, p.gatherSrcs, p.gatherCount, p.len, args.dtype, args.op,
                                   divisor, st),
               "reduce-many", args);
      break;
  }
}

void CudaPieces::finish(ProgramRunner& runner, const ExecArgs& args) {
  int err = 0;
  const uint32_t value = signal(&err);
  if (value == 0) {
    fail(ErrorCode::kCudaError, "rank {}: {}: launching the stream signal failed: {} ({})", rank_,
         runner.what(args), kc::errorString(err), err);
  }
  // The kernels are bounded (no device-side waits), so this ends unless the GPU is lost; still
  // bounded by the timeout, and abort() is noticed. No CUDA call until the deadline.
  const Deadline deadline = Deadline::after(args.timeoutSeconds);
  for (int round = 0;; ++round) {
    if (arrived(value)) return;
    if (round < kStreamSpinRounds) continue;
    if (runner.aborted()) {
      runner.failWaiting(ErrorCode::kAborted, args, "communicator aborted by this process");
    }
    if (deadline.expired()) {
      // A kernel that faulted leaves the stream in error (and the signal never comes): say so.
      const cudaError_t state = cudaStreamQuery(asStream(stream_));
      if (state != cudaSuccess && state != cudaErrorNotReady) {
        runner.failWaiting(ErrorCode::kCudaError, args,
                           fmt::format("a kernel failed: {} ({})", cudaGetErrorString(state),
                                       int(state)));
      }
      runner.failWaiting(
          ErrorCode::kTimeout, args,
          fmt::format("kernels did not finish in {} s (BRAID_TIMEOUT)", args.timeoutSeconds));
    }
    if (round < 4 * kStreamSpinRounds) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void CudaPieces::abandon() {
  // Kernels may still be queued on the stream; let them finish before buffers are given back
  // (bounded: they are; a stream left in error by a faulted kernel never signals).
  int err = 0;
  const uint32_t value = signal(&err);
  if (value == 0) return;
  const Deadline deadline = Deadline::after(timeoutSeconds_);
  for (int round = 0; !arrived(value) && !deadline.expired(); ++round) {
    if (round > kStreamSpinRounds) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace braid::comm::device
