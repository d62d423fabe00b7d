// The piece engine of device memory (for comm/engine/executor.h): launches every copy/reduce of
// a piece as a CUDA kernel (kernels/cuda) on the communicator's internal stream. It is deferred:
// each sweep the engine launches at most one piece per lane, finish() waits once for the stream
// (bounded by the timeout), and only then does the engine release the consumed slots and post the
// filled ones, so a slot counter never moves before the kernel that used the slot finished.
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

}  // namespace braid::comm::device
