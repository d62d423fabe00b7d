// Runs one rank's program on device buffers over a CUDA IPC endpoint: the engine of the host
// path (comm/engine/program_runner.h: lanes, pieces, headers and probes, liveness, idle policy,
// errors) with a piece engine that launches every copy/reduce as a CUDA kernel (kernels/cuda) on
// the executor's internal stream. Each sweep launches at most one piece per lane, waits once for
// the stream (bounded by the timeout), and only then does the engine release the consumed slots
// and post the filled ones, so a slot counter never moves before the kernel that used the slot
// finished.
#pragma once

#include <atomic>

#include "comm/engine/program_runner.h"

namespace braid::comm::device {

/// Launches each piece's kernels; finish() records an event and waits for it.
class CudaPieces final : public PieceEngine {
 public:
  /// `stream`: the internal cudaStream_t (as void*); the calling thread's current device is the
  /// communicator's.
  CudaPieces(int rank, void* stream);
  ~CudaPieces() override;
  CudaPieces(const CudaPieces&) = delete;
  CudaPieces& operator=(const CudaPieces&) = delete;

  void move(const Piece& piece, const ExecArgs& args) override;
  void finish(ProgramRunner& runner, const ExecArgs& args) override;
  void abandon() override;
  const char* where() const override { return " on the device"; }
  /// The runner whose what() names the op in launch errors.
  void attach(const ProgramRunner* runner) { runner_ = runner; }

 private:
  void launched(int err, const char* kernel, const ExecArgs& args) const;

  int rank_;
  void* stream_;
  void* event_ = nullptr;  // cudaEvent_t recorded after each sweep's kernels
  const ProgramRunner* runner_ = nullptr;
};

class DeviceExecutor {
 public:
  /// `stream` is the internal cudaStream_t (as void*) of the calling progress thread, whose
  /// current device is the communicator's.
  DeviceExecutor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted, void* stream)
      : pieces_(endpoint.rank(), stream),
        runner_(endpoint, aborted, /*oversubscribed=*/true, pieces_) {
    pieces_.attach(&runner_);
  }

  /// Runs `program` on the device buffers of `args` to completion (the stream is idle on
  /// return). Throws braid::Error (kTimeout, kRemoteError, kMismatch, kAborted, kCudaError).
  void run(const RankProgram& program, const ExecArgs& args) { runner_.run(program, args); }

 private:
  CudaPieces pieces_;  // before runner_, which holds a reference to it
  ProgramRunner runner_;
};

}  // namespace braid::comm::device
