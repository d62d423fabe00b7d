#include "comm.h"

#include <fmt/format.h>

#include "errors.h"

using braid::Communicator;
using braid::DeviceCommunicator;
using braid::ErrorCode;

ncclComm::~ncclComm() {
  if (initThread_.joinable()) initThread_.join();  // creation is bounded by its timeout
}

void ncclComm::initialize(const std::function<Communicator()>& make) {
  std::optional<Communicator> made;
  std::exception_ptr error;
  try {
    made.emplace(make());
  } catch (...) {
    error = std::current_exception();
  }
  finishInit(std::move(made), error);
  if (error) std::rethrow_exception(error);
}

void ncclComm::defer(std::function<Communicator()> make) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = InitState::kDeferred;
  deferred_ = std::move(make);
}

void ncclComm::runDeferred() {
  std::function<Communicator()> make;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    make = std::move(deferred_);
    state_ = InitState::kRunning;
  }
  initialize(make);
}

void ncclComm::initializeInBackground(std::function<Communicator()> make) {
  initThread_ = std::thread([this, make = std::move(make)] {
    try {
      initialize(make);
    } catch (...) {  // kept by finishInit: asyncError() and every later call report it
    }
  });
}

void ncclComm::finishInit(std::optional<Communicator> comm, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error) {
    state_ = InitState::kFailed;
    initError_ = error;
    try {
      std::rethrow_exception(error);
    } catch (const braid::Error& e) {
      asyncError_ = braid::nccl::resultOf(e.code());
      asyncMessage_ = e.what();
    } catch (const std::exception& e) {
      asyncError_ = ncclInternalError;
      asyncMessage_ = e.what();
    }
  } else {
    state_ = InitState::kReady;
    host_ = std::move(comm);
    if (aborted.load()) host_->abort();  // aborted while it was being made
  }
  initDone_.notify_all();
}

bool ncclComm::initPending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_ == InitState::kDeferred || state_ == InitState::kRunning;
}

Communicator& ncclComm::host(const char* call) {
  std::unique_lock<std::mutex> lock(mutex_);
  BRAID_ENFORCE(state_ != InitState::kDeferred, ErrorCode::kInvalidUsage,
                "rank {}: {}: the communicator's init is deferred to the end of the group it "
                "was called in (call ncclGroupEnd first)",
                settings.rank, call);
  initDone_.wait(lock, [&] { return state_ != InitState::kRunning; });
  if (state_ == InitState::kFailed) std::rethrow_exception(initError_);
  return *host_;
}

DeviceCommunicator& ncclComm::device(const char* call) {
  Communicator& comm = host(call);
  std::lock_guard<std::mutex> creation(deviceCreation_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_) return *device_;
  }
  BRAID_ENFORCE(settings.device >= 0, ErrorCode::kInvalidUsage,
                "rank {}: {} on device buffers: no CUDA device was current when the "
                "communicator was created",
                settings.rank, call);
  auto made = std::make_unique<DeviceCommunicator>(
      DeviceCommunicator::create(comm, settings.device, settings.options));
  std::lock_guard<std::mutex> lock(mutex_);
  device_ = std::move(made);
  return *device_;
}

bool ncclComm::hasDevice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_ != nullptr;
}

void ncclComm::abort() {
  aborted.store(true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (device_) device_->abort();
  if (host_) host_->abort();
}

void ncclComm::finalize() {
  DeviceCommunicator* device = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    device = device_.get();
  }
  if (device != nullptr) device->synchronize();
}

void ncclComm::recordFailure(ncclResult_t result, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (asyncError_ == ncclSuccess) {
    asyncError_ = result;
    asyncMessage_ = message;
  }
}

ncclResult_t ncclComm::asyncError(std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ == InitState::kDeferred || state_ == InitState::kRunning) return ncclInProgress;
  if (asyncError_ == ncclSuccess && device_ && device_->asyncError() != ErrorCode::kOk) {
    try {
      device_->checkAsyncError();
    } catch (const braid::Error& e) {
      asyncError_ = braid::nccl::resultOf(e.code());
      asyncMessage_ = e.what();
    }
  }
  if (message != nullptr) *message = asyncMessage_;
  return asyncError_;
}

ncclRedOp_t ncclComm::addPreMulSum(const braid::nccl::PreMulSum& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  // NCCL's dynamic ops are ncclNumOps.. ncclMaxRedOp; a value is not reused until it wraps.
  BRAID_ENFORCE(nextOp_ < int(ncclMaxRedOp), ErrorCode::kInvalidUsage,
                "rank {}: ncclRedOpCreatePreMulSum: no op values left", settings.rank);
  const int value = nextOp_++;
  preMulSums_[value] = op;
  return static_cast<ncclRedOp_t>(value);
}

void ncclComm::removePreMulSum(ncclRedOp_t op, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (preMulSums_.erase(int(op)) == 0) {
    braid::nccl::argumentError(fmt::format(
        "rank {}: {}: op {} was not made by ncclRedOpCreatePreMulSum on this communicator",
        settings.rank, call, int(op)));
  }
}

std::optional<braid::nccl::PreMulSum> ncclComm::preMulSum(ncclRedOp_t op) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = preMulSums_.find(int(op));
  if (it == preMulSums_.end()) return std::nullopt;
  return it->second;
}

namespace braid::nccl {

CommRef::CommRef(ncclComm_t comm, const char* call) : comm_(comm) {
  if (comm == nullptr) argumentError(fmt::format("{}: comm is NULL", call));
  comm_->refs.fetch_add(1, std::memory_order_relaxed);
}

CommRef::CommRef(const CommRef& other) : comm_(other.comm_) {
  if (comm_ != nullptr) comm_->refs.fetch_add(1, std::memory_order_relaxed);
}

CommRef::~CommRef() {
  if (comm_ != nullptr) releaseHandle(comm_);
}

void releaseHandle(ncclComm_t comm) {
  if (comm->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete comm;
}

}  // namespace braid::nccl
