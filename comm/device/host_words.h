// Words in host-mapped pinned memory that the device writes (a one-thread kernel enqueued on a
// stream: "the stream got here") and the progress thread reads with plain atomic loads. They are
// how the progress thread learns that a stream reached a point without calling CUDA.
//
// Why no CUDA call: seen on an H200 (driver 580.159, CUDA 13.0, 2026-11-26), cuEventCreate,
// cuEventDestroy and cuMemcpyAsync take a context-wide write lock, which waits for every thread
// that is inside a synchronous CUDA call: a caller's cudaStreamSynchronize or pageable
// cudaMemcpy on a stream that waits for a collective. The progress thread is what ends that wait,
// so each such call in it stalls until the caller's call happens to let go (milliseconds per
// call) or deadlocks (ranks that are threads of one process). So once a communicator exists, the
// progress thread only launches kernels and reads these words (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::comm::device {

class HostWords {
 public:
  /// `count` words, zeroed, mapped into the current device's context. Throws kCudaError naming
  /// `rank` and `what`.
  HostWords(int rank, size_t count, const char* what);
  ~HostWords();
  HostWords(const HostWords&) = delete;
  HostWords& operator=(const HostWords&) = delete;

  size_t size() const { return count_; }
  /// Word i as the host sees it now (acquire: what the device wrote before it is visible).
  uint32_t load(size_t i) const;
  /// Sets word i from the host (before a signal that will overwrite it is enqueued).
  void store(size_t i, uint32_t value);
  /// Enqueues on `stream` (a cudaStream_t) a kernel that writes `value` into word i once
  /// everything enqueued on that stream before it has finished. Returns the launch's
  /// cudaError_t as int (0 when enqueued).
  int signal(void* stream, size_t i, uint32_t value);
  /// Word i's device address (for kernels and stream memory operations).
  uint32_t* device(size_t i) const { return device_ + i; }

 private:
  int rank_;
  size_t count_;
  uint32_t* host_ = nullptr;
  uint32_t* device_ = nullptr;
};

}  // namespace braid::comm::device
