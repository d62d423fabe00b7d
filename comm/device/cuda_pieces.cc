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

CudaPieces::CudaPieces(int rank, void* stream) : PieceEngine(true), rank_(rank), stream_(stream) {
  cudaEvent_t ev;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device executor: cudaEventCreate failed: {}", rank_,
         cudaGetErrorString(err));
  }
  event_ = ev;
}

CudaPieces::~CudaPieces() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

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
  auto ev = static_cast<cudaEvent_t>(event_);
  cudaError_t err = cudaEventRecord(ev, asStream(stream_));
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: {}: cudaEventRecord failed: {}", rank_, runner.what(args),
         cudaGetErrorString(err));
  }
  // The kernels are bounded (no device-side waits), so this ends unless the GPU is lost; still
  // bounded by the timeout, and abort() is noticed.
  const Deadline deadline = Deadline::after(args.timeoutSeconds);
  for (int round = 0;; ++round) {
    err = cudaEventQuery(ev);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) {
      fail(ErrorCode::kCudaError, "rank {}: {}: a kernel failed: {} ({})", rank_, runner.what(args),
           cudaGetErrorString(err), int(err));
    }
    if (round < kStreamSpinRounds) continue;
    if (runner.aborted()) {
      runner.failWaiting(ErrorCode::kAborted, args, "communicator aborted by this process");
    }
    if (deadline.expired()) {
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
  // Kernels may still be queued on the stream; let them finish before buffers are given back.
  cudaStreamSynchronize(asStream(stream_));
}

}  // namespace braid::comm::device
