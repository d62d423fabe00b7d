// Stream ordering of device collectives: the user stream waits, on the device, for a counter in
// host-mapped pinned memory that the progress thread raises when an op has finished (or failed).
// The counter only grows (op n raises it to n, wrap-safe comparisons), so one word serves every
// op of a communicator, and a user stream never waits on an op issued after its own.
#pragma once

#include <cstdint>

#include "comm/device/host_words.h"

namespace braid::comm::device {

class CompletionFlag {
 public:
  /// Allocates the mapped word on the current device's context. Throws kCudaError naming `rank`.
  explicit CompletionFlag(int rank);
  ~CompletionFlag();
  CompletionFlag(const CompletionFlag&) = delete;
  CompletionFlag& operator=(const CompletionFlag&) = delete;

  /// Makes `stream` (a cudaStream_t) wait until the counter reaches `target`. Uses the driver's
  /// cuStreamWaitValue32 (no SM is held while waiting; found through cudaGetDriverEntryPoint, so
  /// nothing links libcuda) unless BRAID_CUDA_WAIT=kernel or the driver lacks it; otherwise a
  /// one-thread kernel polls the word with __nanosleep and gives up after `maxSeconds`, noting
  /// the give-up (waitGaveUp()). Throws kCudaError when nothing could be enqueued.
  void enqueueWait(void* stream, uint32_t target, double maxSeconds);
  /// Raises the counter to `value` (release order: everything the progress thread did before is
  /// visible to what the stream runs after the wait).
  void publish(uint32_t value);
  uint32_t value() const;
  /// True once a wait kernel stopped waiting at its bound (the stream then ran on unsynchronised).
  bool waitGaveUp() const;
  /// The flag's device address: [0] the counter, [1] set by a kernel that gave up waiting (the
  /// executor kernel waits for the counter itself).
  uint32_t* deviceWords() const { return words_.device(0); }
  /// Which wait enqueueWait uses: "driver" or "kernel".
  const char* mode() const { return useDriver_ ? "driver" : "kernel"; }

 private:
  int rank_;
  HostWords words_;  // [0] counter, [1] a wait kernel gave up
  bool useDriver_ = false;
  void* waitValue_ = nullptr;  // cuStreamWaitValue32
};

/// Loads the wait and signal kernels of stream_wait.cu into the current context now
/// (kernels/cuda's loadAllKernels() says why a lazy load at first launch can deadlock). Returns
/// the cudaError_t as int.
int loadStreamKernels();

/// Enqueues the signal kernel (stream_wait.cu): writes `value` to the host-mapped word once the
/// stream's earlier work finished (HostWords::signal). Returns the launch's cudaError_t as int.
int launchSignalKernel(void* stream, uint32_t* deviceWord, uint32_t value);

/// Enqueues the bounded wait kernel (stream_wait.cu): spins until (int32)(flag[0] - target) >= 0
/// or maxNanos elapsed (then sets flag[1] = 1). Returns the launch's cudaError_t as int.
int launchWaitKernel(void* stream, const uint32_t* deviceFlag, uint32_t target, uint64_t maxNanos);

}  // namespace braid::comm::device
