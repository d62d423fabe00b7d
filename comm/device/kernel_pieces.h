// The piece engine of the executor kernel (for comm/engine/executor.h): each piece becomes a
// command in the executor's ring (exec_ring.h), which the op's executor kernel, launched on the
// caller's stream when the op was admitted, carries out. It is deferred like CudaPieces: each
// sweep the engine posts at most one piece per lane, finish() waits (bounded by the timeout) until
// every posted command is done, and only then does the engine release the consumed slots and post
// the filled ones. It makes no CUDA call: the progress thread only writes and reads host memory.
#pragma once

#include "comm/device/device_pieces.h"
#include "comm/device/exec_ring.h"

namespace braid::comm::device {

class KernelPieces final : public DevicePieces {
 public:
  /// `blocks`: the executor's grid (chunks are sized to spread a command over it).
  KernelPieces(int rank, ExecRing& ring, unsigned blocks, double timeoutSeconds);

  void move(const Piece& piece, const ExecArgs& args) override;
  void finish(ProgramRunner& runner, const ExecArgs& args) override;
  void abandon() override;

 private:
  /// Posts one command, first waiting (bounded) for its ring slot.
  void post(kernels::cuda::ExecCommand c, const void* const* srcs, size_t elemBytes,
            const ExecArgs& args);
  /// Whether every command posted so far is done (advances waitFrom_).
  bool allDone();

  int rank_;
  ExecRing& ring_;
  unsigned blocks_;
  double timeoutSeconds_;
  uint64_t waitFrom_ = 0;  // commands before it are known done
};

}  // namespace braid::comm::device
