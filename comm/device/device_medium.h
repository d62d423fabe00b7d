// The device medium (comm/detail/medium.h): what a communicator over device buffers adds to the
// shared op queue and engine. A call's buffers must be device memory on the communicator's
// device; its schedule is chosen at the call. Two engines (BRAID_CUDA_ENGINE):
// - executor (opt-in until it has passed the GPU suites; README.md): the call launches the op's executor kernel on the caller's stream
//   (kernels/cuda/executor.h). When it starts it sets one of the op's "ready" words (host_words.h);
//   the progress thread, which waited for that word, names the op the ring's owner and posts the
//   op's pieces as commands (kernel_pieces.h); the kernel ends once the completion flag
//   (completion.h) reaches the op's ticket. The progress thread makes no CUDA call at all.
// - launch (the default): the call enqueues on the caller's stream a signal into the ready word and
//   then a wait for the op's ticket on the completion flag; the progress thread launches each
//   piece's kernel on an internal stream (cuda_pieces.h). Its launches can wait for the driver's
//   context lock while a caller sits in a synchronous CUDA call (README.md), which is what the
//   executor removes.
// Either way, when an op has finished, however it ended, the progress thread raises the flag to
// the highest ticket whose predecessors all finished (ticket_order.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <vector>
#include <memory>
#include <mutex>
#include <optional>

#include "comm/detail/medium.h"
#include "comm/device/completion.h"
#include "comm/device/exec_ring.h"
#include "comm/device/host_words.h"
#include "comm/device/ticket_order.h"

namespace braid::comm::device {

class DeviceMedium final : public Medium {
 public:
  /// Ops one communicator may have admitted and not yet finished.
  static constexpr size_t kReadyWords = 65536;

  /// On `device` (made current by the caller). Throws kCudaError.
  /// `ranks`: how many ranks may share the device (sizes the executor's grid).
  DeviceMedium(int rank, int device, int ranks, double timeoutSeconds);
  ~DeviceMedium() override;
  DeviceMedium(const DeviceMedium&) = delete;
  DeviceMedium& operator=(const DeviceMedium&) = delete;

  void checkBuffers(const OpDesc& d, size_t inBytes, size_t outBytes) const override;
  void* scratchIn() override { return scratch_; }
  void* scratchOut() override { return static_cast<char*>(scratch_) + 1; }
  bool callersRun() const override { return false; }
  bool planAtCall() const override { return true; }
  void progressThreadStarted() override;
  void beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) override;
  void finished(uint64_t ticket) override;

  /// At the call, after the op was checked and numbered, under the queue's lock: marks the
  /// caller's stream (a cudaStream_t) and makes it wait for the op; returns the op's ticket.
  /// Throws kCudaError when either could not be enqueued, kInvalidUsage when kReadyWords ops are
  /// already in flight (the op is then not queued).
  uint64_t admit(void* stream, DataType type, RedOp op);
  /// True with the executor engine (then ring() and executorBlocks() apply).
  bool executor() const { return ring_ != nullptr; }
  ExecRing& ring() { return *ring_; }
  /// The executor's grid: BRAID_CUDA_BLOCKS, else the device's multiprocessors shared by
  /// `ranks` ranks with room for two ops each, at least 1.
  unsigned executorBlocks() const { return blocks_; }
  /// The internal stream the piece engine launches on (a cudaStream_t).
  void* stream() const { return stream_; }
  /// Blocks until every admitted op finished, bounded by the timeout measured from the last one
  /// that finished (kTimeout).
  void waitAllFinished();
  /// A kTimeout error once a wait kernel gave up on its bound.
  std::optional<Error> failureOutsideOps() const override;

 private:
  int rank_;
  int device_;
  double timeoutSeconds_;
  void* stream_ = nullptr;   // cudaStream_t
  void* scratch_ = nullptr;  // 2 device bytes
  std::unique_ptr<CompletionFlag> flag_;
  std::unique_ptr<HostWords> ready_;  // one word per op in flight: its caller's stream got there
  std::unique_ptr<ExecRing> ring_;    // the executor engine's; null with the launch engine
  unsigned blocks_ = 1;
  /// Whether a ready word may serve another op: its signal ran (launch), or its executor left.
  bool wordFree(uint32_t word) const;

  std::mutex mutex_;  // below; taken under the queue's lock (admit, finished), never around it
  std::condition_variable finishedCv_;
  uint64_t admitted_ = 0;
  InOrderTickets order_;
  std::vector<uint32_t> freeWords_;     // ready words no op in flight holds
  std::vector<uint32_t> pendingWords_;  // of ended ops, free once their signal has run
  struct Admitted {
    int64_t word;  // its ready word (-1: ended)
    DataType type;
    RedOp op;
  };
  std::deque<Admitted> admittedOps_;  // tickets firstTicket_..
  uint64_t firstTicket_ = 1;
};

}  // namespace braid::comm::device
