#include "comm/device/device_medium.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <thread>

#include "comm/device/op.h"
#include "comm/device/pointer.h"
#include "common/error.h"
#include "kernels/cuda/cuda_kernels.h"

namespace braid::comm::device {
namespace {

void checkCuda(cudaError_t err, int rank, const char* call) {
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device communicator: {} failed: {} ({})", rank, call,
         cudaGetErrorString(err), int(err));
  }
}

}  // namespace

DeviceMedium::DeviceMedium(int rank, int device, double timeoutSeconds)
    : rank_(rank), device_(device), timeoutSeconds_(timeoutSeconds) {
  try {
    // Every kernel the progress thread may launch is loaded before any stream waits for it
    // (kernels/cuda/cuda_kernels.h: a lazy load at first launch would wait for that stream).
    checkCuda(static_cast<cudaError_t>(kernels::cuda::loadAllKernels()), rank,
              "loading braid's kernels");
    cudaStream_t s = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank, "cudaStreamCreate");
    stream_ = s;
    checkCuda(cudaMalloc(&scratch_, 256), rank, "cudaMalloc(scratch)");
    flag_ = std::make_unique<CompletionFlag>(rank);
    ready_ = std::make_unique<HostWords>(rank, kReadyWords, "the ready words");
    freeWords_.reserve(kReadyWords);
    for (size_t i = kReadyWords; i-- > 0;) freeWords_.push_back(uint32_t(i));
  } catch (...) {
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    throw;
  }
}

DeviceMedium::~DeviceMedium() {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device_);
  ready_.reset();
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  cudaFree(scratch_);
  flag_.reset();
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

void DeviceMedium::checkBuffers(const OpDesc& d, size_t inBytes, size_t outBytes) const {
  checkDeviceBuffers(d, rank_, device_, cudaPointerClassifier(), inBytes, outBytes);
}

void DeviceMedium::progressThreadStarted() { cudaSetDevice(device_); }

uint64_t DeviceMedium::admit(void* userStream) {
  std::lock_guard<std::mutex> lock(mutex_);
  BRAID_ENFORCE(!freeWords_.empty(), ErrorCode::kInvalidUsage,
                "rank {}: device communicator: {} collectives in flight, the most one "
                "communicator takes; synchronize a stream before issuing more",
                rank_, kReadyWords);
  const uint32_t word = freeWords_.back();
  const uint64_t ticket = admitted_ + 1;
  // The caller's stream: first "my earlier work is done" (the ready word), then wait for the op.
  ready_->store(word, 0);
  checkCuda(static_cast<cudaError_t>(ready_->signal(userStream, word, 1)), rank_,
            "launching the ready signal on the caller's stream");
  // Generous bound for a wait kernel: the progress side publishes within its own timeout.
  flag_->enqueueWait(userStream, uint32_t(ticket), 2 * timeoutSeconds_ + 10);
  freeWords_.pop_back();
  admitted_ = ticket;
  wordOf_.push_back(word);
  return ticket;
}

void DeviceMedium::beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) {
  size_t word;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    word = size_t(wordOf_.at(ticket - firstTicket_));
  }
  // The caller's preceding work is not ours to bound; wait for it while watching abort().
  for (int round = 0;; ++round) {
    if (ready_->load(word) != 0) return;
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: aborted while waiting for the caller's stream", rank_);
    }
    if (round > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void DeviceMedium::finished(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t& word = wordOf_.at(ticket - firstTicket_);
  // The word is free again once its signal ran: an op that never ran (failed before it) may
  // still have its signal queued on the caller's stream, behind this very flag.
  if (word >= 0) pendingWords_.push_back(uint32_t(word));
  word = -1;
  while (!wordOf_.empty() && wordOf_.front() < 0) {
    wordOf_.pop_front();
    ++firstTicket_;
  }
  for (size_t i = 0; i < pendingWords_.size();) {
    if (ready_->load(pendingWords_[i]) != 0) {
      freeWords_.push_back(pendingWords_[i]);
      pendingWords_[i] = pendingWords_.back();
      pendingWords_.pop_back();
    } else {
      ++i;
    }
  }
  // The engine left the internal stream idle (a run ends after its last signal, a failed one
  // after abandon()), so nothing of these ops runs after the release.
  flag_->publish(uint32_t(order_.finish(ticket)));
  finishedCv_.notify_all();
}

void DeviceMedium::waitAllFinished() {
  // The progress side ends every op within its own timeout of no progress (with the op's error):
  // this bound, the wait kernel's, only catches a progress side that is itself stuck, and is
  // longer so that the op's own error (naming the peer it waited for) is what callers see.
  const double bound = 2 * timeoutSeconds_ + 10;
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = order_.done();
  while (order_.done() != admitted_) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(bound));
    finishedCv_.wait_until(lock, until, [&] { return order_.done() != seen; });
    if (order_.done() == seen) {
      fail(ErrorCode::kTimeout,
           "rank {}: device communicator: {} collectives still running after {} s without "
           "progress (BRAID_TIMEOUT)",
           rank_, admitted_ - order_.done(), bound);
    }
    seen = order_.done();
  }
}

std::optional<Error> DeviceMedium::failureOutsideOps() const {
  if (!flag_->waitGaveUp()) return std::nullopt;
  return Error(ErrorCode::kTimeout,
               fmt::format("rank {}: a caller's stream stopped waiting for a device collective "
                           "after {} s (the progress side made no progress; BRAID_TIMEOUT)",
                           rank_, 2 * timeoutSeconds_ + 10));
}

}  // namespace braid::comm::device
