#include "comm/device/device_medium.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <thread>

#include "comm/device/op.h"
#include "comm/device/pointer.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/executor.h"

namespace braid::comm::device {
namespace {

void checkCuda(cudaError_t err, int rank, const char* call) {
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device communicator: {} failed: {} ({})", rank, call,
         cudaGetErrorString(err), int(err));
  }
}

}  // namespace

DeviceMedium::DeviceMedium(int rank, int device, int ranks, double timeoutSeconds)
    : rank_(rank), device_(device), timeoutSeconds_(timeoutSeconds) {
  const std::string engine = envString("BRAID_CUDA_ENGINE").value_or("launch");
  BRAID_ENFORCE(engine == "executor" || engine == "launch", ErrorCode::kInvalidUsage,
                "BRAID_CUDA_ENGINE='{}': expected executor or launch", engine);
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
    if (engine == "executor") {
      checkCuda(static_cast<cudaError_t>(kernels::cuda::loadExecutor()), rank,
                "loading the executor kernel");
      ring_ = std::make_unique<ExecRing>(rank, kReadyWords);
      // Every rank's executor must have a block on the GPU at once (a collective needs them
      // all), and one rank may have two ops' executors running (two streams): so at most
      // SMs / (2 x ranks) blocks each, when a block takes a whole multiprocessor.
      int sms = 1;
      checkCuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), rank,
                "cudaDeviceGetAttribute(multiprocessors)");
      const int fromEnv = int(envInt("BRAID_CUDA_BLOCKS").value_or(0));
      BRAID_ENFORCE(fromEnv >= 0 && fromEnv <= 4 * sms, ErrorCode::kInvalidUsage,
                    "BRAID_CUDA_BLOCKS={}: expected 1 to {} (0: automatic)", fromEnv, 4 * sms);
      blocks_ = unsigned(fromEnv > 0 ? fromEnv : std::max(1, sms / (2 * std::max(1, ranks))));
      BRAID_INFO("rank {}: device collectives run in an executor kernel of {} blocks", rank,
                 blocks_);
    }
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
  if (ring_ != nullptr) {
    // Executors of ops that ended may still be leaving (they read the flag, the ring and their
    // ready word): wait for them, bounded, before that memory goes.
    const Deadline deadline = Deadline::after(timeoutSeconds_);
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint32_t w : pendingWords_) {
      while (!wordFree(w) && !deadline.expired()) std::this_thread::yield();
    }
  }
  ring_.reset();
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

bool DeviceMedium::wordFree(uint32_t word) const {
  const uint32_t v = ready_->load(word);
  return ring_ != nullptr ? v == kernels::cuda::kExecExited : v != 0;
}

uint64_t DeviceMedium::admit(void* userStream, DataType type, RedOp op) {
  std::lock_guard<std::mutex> lock(mutex_);
  BRAID_ENFORCE(!freeWords_.empty(), ErrorCode::kInvalidUsage,
                "rank {}: device communicator: {} collectives in flight, the most one "
                "communicator takes; synchronize a stream before issuing more",
                rank_, kReadyWords);
  const uint32_t word = freeWords_.back();
  const uint64_t ticket = admitted_ + 1;
  ready_->store(word, 0);
  // Generous bound for the waits on the device: the progress side ends every op within its own
  // timeout, so this only catches a progress side that is itself stuck.
  const double bound = 2 * timeoutSeconds_ + 10;
  if (ring_ != nullptr) {
    // The op's executor on the caller's stream: it starts after the caller's earlier work,
    // carries out the op's commands, and ends with the op.
    const kernels::cuda::ExecParams params =
        ring_->params(ticket, type, op, ready_->device(word), flag_->deviceWords(), word,
                      static_cast<uint64_t>(bound * 1e9));
    checkCuda(static_cast<cudaError_t>(
                  kernels::cuda::launchExecutor(params, blocks_, type, op, userStream)),
              rank_, "launching the executor kernel on the caller's stream");
  } else {
    // The caller's stream: first "my earlier work is done" (the ready word), then wait for the op.
    checkCuda(static_cast<cudaError_t>(ready_->signal(userStream, word, 1)), rank_,
              "launching the ready signal on the caller's stream");
    flag_->enqueueWait(userStream, uint32_t(ticket), bound);
  }
  freeWords_.pop_back();
  admitted_ = ticket;
  admittedOps_.push_back({int64_t(word), type, op});
  return ticket;
}

void DeviceMedium::beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) {
  size_t word;
  DataType type;
  RedOp op;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Admitted& a = admittedOps_.at(ticket - firstTicket_);
    word = size_t(a.word);
    type = a.type;
    op = a.op;
  }
  // The caller's preceding work is not ours to bound; wait for it while watching abort().
  for (int round = 0;; ++round) {
    if (ready_->load(word) != 0) {
      // The executor runs: the op's commands follow (of its type and op, or bytes).
      if (ring_ != nullptr) ring_->beginOp(ticket, type, op);
      return;
    }
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: aborted while waiting for the caller's stream", rank_);
    }
    if (round > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void DeviceMedium::finished(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t& word = admittedOps_.at(ticket - firstTicket_).word;
  // The word is free again once its signal ran, or its executor left: an op that never ran
  // (failed before it) may still have its signal or executor queued on the caller's stream.
  if (word >= 0) pendingWords_.push_back(uint32_t(word));
  word = -1;
  while (!admittedOps_.empty() && admittedOps_.front().word < 0) {
    admittedOps_.pop_front();
    ++firstTicket_;
  }
  for (size_t i = 0; i < pendingWords_.size();) {
    if (wordFree(pendingWords_[i])) {
      freeWords_.push_back(pendingWords_[i]);
      pendingWords_[i] = pendingWords_.back();
      pendingWords_.pop_back();
    } else {
      ++i;
    }
  }
  // The engine left nothing of these ops running (a run ends after its last signal or command,
  // a failed one after abandon()), so nothing of them runs after the release.
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
