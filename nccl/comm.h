// The state behind an ncclComm_t: braid's host Communicator (made at init, perhaps later: in a
// group or non-blocking), its DeviceCommunicator (made on the first device-buffer call), the
// first asynchronous error, and the ops made by ncclRedOpCreatePreMulSum.
//
// Lifetime: the handle holds one reference and every call in progress (or op queued in a group)
// one more; ncclCommDestroy and ncclCommAbort drop the handle's, and whoever drops the last
// frees it. So an abort from another thread (PyTorch's watchdog) never frees the communicator
// under a call still running in it: that call ends with braid's kAborted and frees it on the way
// out.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "braid/braid.hpp"
#include "nccl.h"

namespace braid::nccl {

/// An op made by ncclRedOpCreatePreMulSum: sum after multiplying each input by a scalar.
struct PreMulSum {
  DataType type;
  double scalar = 0;                   ///< ncclScalarHostImmediate: read at creation
  const void* scalarAt = nullptr;      ///< ncclScalarDevice: read when the collective runs
};

/// What a communicator is made of, fixed at the init call.
struct CommSettings {
  int rank = 0;
  int size = 0;
  int device = -1;  ///< the CUDA device current at init (-1: none usable)
  bool blocking = true;
  Options options;
};

}  // namespace braid::nccl

struct ncclComm {
  explicit ncclComm(braid::nccl::CommSettings s) : settings(std::move(s)) {}
  ~ncclComm();

  const braid::nccl::CommSettings settings;
  std::atomic<int> refs{1};
  std::atomic<bool> aborted{false};

  // ---- creation ----
  /// Makes the host communicator now, on this thread (throws what creation threw).
  void initialize(const std::function<braid::Communicator()>& make);
  /// Keeps `make` for initialize() at the end of the thread's group.
  void defer(std::function<braid::Communicator()> make);
  /// Runs the deferred creation (group end); throws what it threw.
  void runDeferred();
  /// Starts creation on a thread of its own (non-blocking config); see initPending().
  void initializeInBackground(std::function<braid::Communicator()> make);
  /// True while a deferred or background creation has not finished.
  bool initPending() const;

  // ---- use ----
  /// The host communicator; waits for a background creation, throws its error or
  /// kInvalidUsage when creation is still deferred to a group's end.
  braid::Communicator& host(const char* call);
  /// The device communicator, created on first use (collective over every rank, like NCCL's
  /// lazy connection setup: every rank reaches it at the same call).
  braid::DeviceCommunicator& device(const char* call);
  bool hasDevice() const;
  /// Tears down from any thread: calls in flight end with kAborted.
  void abort();
  /// Waits for the device work enqueued so far (ncclCommFinalize).
  void finalize();

  // ---- errors ----
  /// Keeps the first failure of an op as the asynchronous error.
  void recordFailure(ncclResult_t result, const std::string& message);
  /// The asynchronous error: ncclInProgress while creating, else the first failure (host or
  /// device), ncclSuccess when none.
  ncclResult_t asyncError(std::string* message);

  // ---- PreMulSum ops ----
  ncclRedOp_t addPreMulSum(const braid::nccl::PreMulSum& op);
  void removePreMulSum(ncclRedOp_t op, const char* call);
  /// The op, or nullopt for an unknown value.
  std::optional<braid::nccl::PreMulSum> preMulSum(ncclRedOp_t op);

 private:
  enum class InitState { kDeferred, kRunning, kReady, kFailed };
  void finishInit(std::optional<braid::Communicator> comm, std::exception_ptr error);

  mutable std::mutex mutex_;
  std::condition_variable initDone_;
  InitState state_ = InitState::kRunning;
  std::function<braid::Communicator()> deferred_;
  std::thread initThread_;
  std::exception_ptr initError_;
  std::optional<braid::Communicator> host_;
  std::unique_ptr<braid::DeviceCommunicator> device_;
  std::mutex deviceCreation_;  // one creation at a time, without holding mutex_ during it
  ncclResult_t asyncError_ = ncclSuccess;
  std::string asyncMessage_;
  std::map<int, braid::nccl::PreMulSum> preMulSums_;
  int nextOp_ = ncclNumOps;
};

namespace braid::nccl {

/// One reference to a communicator for the length of a call or a queued op (see above).
class CommRef {
 public:
  CommRef() = default;
  /// Checks comm is not NULL (argument error naming `call`) and takes a reference.
  CommRef(ncclComm_t comm, const char* call);
  CommRef(const CommRef& other);
  CommRef(CommRef&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  CommRef& operator=(CommRef other) noexcept {
    std::swap(comm_, other.comm_);
    return *this;
  }
  ~CommRef();
  ncclComm* operator->() const { return comm_; }
  ncclComm* get() const { return comm_; }

 private:
  ncclComm* comm_ = nullptr;
};

/// Drops the handle's reference (destroy, abort): frees the communicator if no call holds it.
void releaseHandle(ncclComm_t comm);

}  // namespace braid::nccl
