// The device medium (comm/detail/medium.h): what a communicator over device buffers adds to the
// shared op queue and engine. A call's buffers must be device memory on the communicator's
// device; its schedule is chosen at the call; the call enqueues on the caller's stream a signal
// into one of the op's "ready" words (host_words.h) and then a wait for the op's ticket on the
// completion flag (completion.h). The progress thread runs every op at once: it first waits for
// the ready word (the caller's earlier work), runs the op with the CUDA piece engine on the
// internal stream, and when the op has finished, however it ended, raises the flag to the
// highest ticket whose predecessors all finished (ticket_order.h), which releases the callers'
// streams. Past construction, the progress thread's side makes no CUDA call (host_words.h).
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
#include "comm/device/host_words.h"
#include "comm/device/ticket_order.h"

namespace braid::comm::device {

class DeviceMedium final : public Medium {
 public:
  /// Ops one communicator may have admitted and not yet finished.
  static constexpr size_t kReadyWords = 65536;

  /// On `device` (made current by the caller). Throws kCudaError.
  DeviceMedium(int rank, int device, double timeoutSeconds);
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
  uint64_t admit(void* stream);
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

  std::mutex mutex_;  // below; taken under the queue's lock (admit, finished), never around it
  std::condition_variable finishedCv_;
  uint64_t admitted_ = 0;
  InOrderTickets order_;
  std::vector<uint32_t> freeWords_;     // ready words no op in flight holds
  std::vector<uint32_t> pendingWords_;  // of ended ops, free once their signal has run
  std::deque<int64_t> wordOf_;       // ready word of tickets firstTicket_.. (-1: ended)
  uint64_t firstTicket_ = 1;
};

}  // namespace braid::comm::device
