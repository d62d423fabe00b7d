// The piece engine of device memory (for comm/engine/executor.h): launches every copy/reduce of
// a piece as a CUDA kernel (kernels/cuda) on the communicator's internal stream. It is deferred:
// each sweep the engine launches at most one piece per lane, finish() waits once for the stream
// (bounded by the timeout), and only then does the engine release the consumed slots and post the
// filled ones, so a slot counter never moves before the kernel that used the slot finished.
// The wait is a signal kernel writing a host-mapped word (host_words.h), read without CUDA calls.
#pragma once

#include <atomic>

#include "comm/device/host_words.h"
#include "comm/device/device_pieces.h"

namespace braid::comm::device {

/// Launches each piece's kernels; finish() enqueues a signal and waits for it.
class CudaPieces final : public DevicePieces {
 public:
  /// `stream`: the internal cudaStream_t (as void*); the calling thread's current device is the
  /// communicator's. `timeoutSeconds` bounds abandon()'s wait.
  CudaPieces(int rank, void* stream, double timeoutSeconds);
  ~CudaPieces() override;
  CudaPieces(const CudaPieces&) = delete;
  CudaPieces& operator=(const CudaPieces&) = delete;

  void move(const Piece& piece, const ExecArgs& args) override;
  void finish(ProgramRunner& runner, const ExecArgs& args) override;
  void abandon() override;

 private:
  void launched(int err, const char* kernel, const ExecArgs& args) const;
  /// Enqueues the next signal; returns its value (0 when the launch failed: *err says why).
  uint32_t signal(int* err);
  /// Whether the signal `value` has come back.
  bool arrived(uint32_t value) const;

  int rank_;
  void* stream_;
  double timeoutSeconds_;
  HostWords done_;        // [0]: the last signal the internal stream reached
  uint32_t sent_ = 0;     // the last signal enqueued
};

}  // namespace braid::comm::device
