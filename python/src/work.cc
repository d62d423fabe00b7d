#include "work.h"

#include <fmt/format.h>

#include <stdexcept>

#include "watcher.h"

namespace braid::pytorch {
namespace {

c10::intrusive_ptr<c10::ivalue::Future> makeFuture() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

BraidWork::BraidWork(int rank, ::c10d::OpType type, std::string opName,
                     std::shared_ptr<Communicator> comm, double timeoutSeconds,
                     std::weak_ptr<Watcher> watcher)
    : ::c10d::Work(rank, type),
      opName_(std::move(opName)),
      comm_(std::move(comm)),
      timeoutSeconds_(timeoutSeconds),
      watcher_(std::move(watcher)) {}

BraidWork::~BraidWork() {
  // Requests must die before the buffers they use (their destructor waits, bounded).
  requests.clear();
}

Deadline BraidWork::defaultDeadline() const { return Deadline::after(3 * timeoutSeconds_ + 60); }

bool BraidWork::complete(Deadline deadline, bool userDeadline) {
  std::unique_lock<std::timed_mutex> lock(completing_, std::defer_lock);
  if (!lock.try_lock_until(deadline.when())) return false;  // another thread is completing it
  {
    std::lock_guard<std::mutex> state(stateMutex_);
    if (done_) return true;
  }
  std::string failure;
  for (auto& request : requests) {
    try {
      request.wait(deadline);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kTimeout && !request.test()) {
        // The wait's deadline passed, the op still runs.
        if (userDeadline) return false;
        comm_->abort();  // ours passed: the op is stuck beyond braid's own timeouts
        failure = fmt::format("timed out: not finished after {:.0f} s, communicator aborted ({})",
                              3 * timeoutSeconds_ + 60, e.what());
        try {
          request.wait(Deadline::after(timeoutSeconds_ + 1));
        } catch (const std::exception&) {
        }
      } else if (failure.empty()) {
        // braid's own timeout (no progress for the group's timeout): say so in words people
        // grep for.
        failure = e.code() == ErrorCode::kTimeout ? fmt::format("timed out: {}", e.what())
                                                  : std::string(e.what());
      }
    }
  }
  if (failure.empty() && anySource_) {
    // PyTorch's recv fills the whole tensor: a smaller message is as wrong as a larger one.
    const RecvResult got = requests.front().received();
    if (got.bytes != anySourceBytes_) {
      failure = fmt::format("rank {} sent a message of {} bytes, the tensor holds {} bytes",
                            got.source, got.bytes, anySourceBytes_);
    } else {
      anySourceRank_.store(got.source);
    }
  }
  if (failure.empty()) {
    try {
      for (auto& [destination, staged] : copyOut) destination.copy_(staged);
    } catch (const std::exception& e) {
      failure = fmt::format("copying the result out failed: {}", e.what());
    }
  }
  std::exception_ptr error;
  if (!failure.empty()) {
    error = std::make_exception_ptr(
        std::runtime_error(fmt::format("braid {} failed: {}", opName_, failure)));
  }
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> state(stateMutex_);
    done_ = true;
    error_ = error;
    future = future_;
  }
  Work::finish(error);
  if (future) {
    // Callbacks (DDP's, comm hooks') run here, on the completing thread.
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(outputs));
    }
  }
  return true;
}

bool BraidWork::isCompleted() {
  {
    std::lock_guard<std::mutex> state(stateMutex_);
    if (done_) return true;
  }
  for (auto& request : requests) {
    if (!request.test()) return false;
  }
  // Every request finished: completing now only copies results out. Never block here: if
  // another thread is completing it right now, report "not yet".
  return complete(Deadline::after(0), true);
}

bool BraidWork::wait(std::chrono::milliseconds timeout) {
  const bool userDeadline = timeout != kNoTimeout;
  const Deadline deadline = userDeadline
                                ? Deadline::after(std::chrono::duration<double>(timeout).count())
                                : defaultDeadline();
  TORCH_CHECK(complete(deadline, userDeadline), "braid ", opName_, ": not finished within wait(",
              timeout.count(), " ms); it keeps running");
  std::lock_guard<std::mutex> state(stateMutex_);
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::vector<at::Tensor> BraidWork::result() { return outputs; }

int BraidWork::sourceRank() const {
  if (anySource_) {
    const int source = anySourceRank_.load();
    TORCH_CHECK(source >= 0, "braid ", opName_,
                ": sourceRank() is known once the work completed well (wait() first)");
    return source;
  }
  TORCH_CHECK(sourceRank_ >= 0, "braid ", opName_, ": sourceRank() is defined for recv only");
  return sourceRank_;
}

c10::intrusive_ptr<c10::ivalue::Future> BraidWork::getFuture() {
  {
    std::lock_guard<std::mutex> state(stateMutex_);
    if (future_) return future_;
    future_ = makeFuture();
    if (done_) {
      // complete() has passed the point where it looks at future_: mark it here (no callbacks
      // can be attached to a future nobody has seen yet).
      if (error_) {
        future_->setError(error_);
      } else {
        future_->markCompleted(c10::IValue(outputs));
      }
      return future_;
    }
  }
  auto self = c10::intrusive_ptr<BraidWork>::unsafe_reclaim_from_nonowning(this);
  if (auto watcher = watcher_.lock()) {
    watcher->add(self);
  } else {
    complete(defaultDeadline(), false);  // the group is gone: finish it here
  }
  return future_;
}

}  // namespace braid::pytorch
