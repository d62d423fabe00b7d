#include "comm/device/device_medium.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <thread>

#include "comm/device/op.h"
#include "comm/device/pointer.h"
#include "common/error.h"

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
    cudaStream_t s = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank, "cudaStreamCreate");
    stream_ = s;
    checkCuda(cudaMalloc(&scratch_, 256), rank, "cudaMalloc(scratch)");
    flag_ = std::make_unique<CompletionFlag>(rank);
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
  for (void* ev : events_) {
    if (ev != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  }
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
  auto s = static_cast<cudaStream_t>(userStream);
  cudaEvent_t ready = nullptr;
  checkCuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), rank_, "cudaEventCreate");
  cudaError_t err = cudaEventRecord(ready, s);
  if (err != cudaSuccess) {
    cudaEventDestroy(ready);
    checkCuda(err, rank_, "cudaEventRecord on the caller's stream");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t ticket = admitted_ + 1;
  try {
    // Generous bound for a wait kernel: the progress side publishes within its own timeout.
    flag_->enqueueWait(s, uint32_t(ticket), 2 * timeoutSeconds_ + 10);
  } catch (...) {
    cudaEventDestroy(ready);
    throw;
  }
  admitted_ = ticket;
  events_.push_back(ready);
  return ticket;
}

void DeviceMedium::beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) {
  cudaEvent_t ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready = static_cast<cudaEvent_t>(events_.at(ticket - firstEvent_));
  }
  // The caller's preceding work is not ours to bound; wait for it while watching abort().
  for (int round = 0;; ++round) {
    cudaError_t err = cudaEventQuery(ready);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) checkCuda(err, rank_, "waiting for the caller's stream");
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: aborted while waiting for the caller's stream", rank_);
    }
    if (round > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void DeviceMedium::finished(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  void*& ev = events_.at(ticket - firstEvent_);
  if (ev != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  ev = nullptr;
  while (!events_.empty() && events_.front() == nullptr) {
    events_.pop_front();
    ++firstEvent_;
  }
  // The engine left the internal stream idle (a run ends after its last event, a failed one
  // after abandon()), so nothing of these ops runs after the release.
  flag_->publish(uint32_t(order_.finish(ticket)));
  finishedCv_.notify_all();
}

void DeviceMedium::waitAllFinished() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = order_.done();
  while (order_.done() != admitted_) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(timeoutSeconds_));
    finishedCv_.wait_until(lock, until, [&] { return order_.done() != seen; });
    if (order_.done() == seen) {
      fail(ErrorCode::kTimeout,
           "rank {}: device communicator: {} collectives still running after {} s without "
           "progress (BRAID_TIMEOUT)",
           rank_, admitted_ - order_.done(), timeoutSeconds_);
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
