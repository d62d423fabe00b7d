// Runs one rank's program on device buffers over a CUDA IPC endpoint: the same lanes, pieces and
// headers as the host executor, but every copy/reduce is a CUDA kernel (kernels/cuda) on the
// executor's internal stream. Each sweep over the lanes launches at most one piece per lane, waits
// once for the stream (bounded by the timeout), then releases the consumed slots and posts the
// filled ones, so a slot counter never moves before the kernel that used the slot finished.
// Waits spin briefly, then sleep on the endpoint's doorbell; every wait ends in an error naming
// rank, peer, collective and size.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "comm/exec/host_executor.h"
#include "comm/schedule/schedule.h"
#include "transport/transport.h"

namespace braid::comm::device {

class DeviceExecutor {
 public:
  /// `stream` is the internal cudaStream_t (as void*) of the calling progress thread, whose
  /// current device is the communicator's.
  DeviceExecutor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted, void* stream);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  /// Runs `program` on the device buffers of `args` to completion (the stream is idle on
  /// return). Throws braid::Error (kTimeout, kRemoteError, kMismatch, kAborted, kCudaError).
  void run(const RankProgram& program, const ExecArgs& args);

 private:
  struct Cursor {
    const Lane* lane = nullptr;
    size_t step = 0;
    size_t piece = 0;
  };
  /// What to do once the kernels of a launched piece have finished.
  struct Pending {
    Cursor* cursor = nullptr;
    transport::RecvChannel* in = nullptr;  // release (not gather)
    bool gather = false;                   // release every peer's channel of the step
    transport::SendChannel* out = nullptr;
    size_t bytes = 0;
  };
  bool tryLaunch(Cursor& cursor, const ExecArgs& args);
  void finishPending(const ExecArgs& args, const std::vector<Cursor>& cursors);
  void waitStream(const ExecArgs& args, const std::vector<Cursor>& cursors);
  void launched(int err, const char* kernel, const ExecArgs& args);
  void checkHeader(const transport::MessageMeta& meta, size_t bytes, size_t expectBytes, int peer,
                   const ExecArgs& args);
  void slowPathChecks(const std::vector<Cursor>& cursors, const ExecArgs& args, bool checkPeers);
  [[noreturn]] void failWaiting(ErrorCode code, const std::vector<Cursor>& cursors,
                                const ExecArgs& args, const std::string& why);
  char* address(Buf buf, size_t elemOffset, const ExecArgs& args) const;
  std::string what(const ExecArgs& args) const;

  transport::Endpoint& ep_;
  const std::atomic<bool>& aborted_;
  void* stream_;
  void* event_ = nullptr;  // cudaEvent_t recorded after each sweep's kernels
  int rank_;
  int size_;
  size_t elemSize_ = 0;
  transport::MessageMeta expectedMeta_;
  std::vector<Cursor> cursors_;
  std::vector<Pending> pending_;
  std::vector<const void*> gatherSrcs_;
};

}  // namespace braid::comm::device
