// The Work handle the braid process group returns: braid requests plus what to do after them
// (copy staged results back), with PyTorch's wait / is_completed / get_future semantics.
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "braid/braid.hpp"

namespace braid::pytorch {

class Watcher;

/// One issued operation. Completion happens once, on whichever thread gets there first: the
/// caller's wait(), an is_completed() that finds the requests done, or the group's watcher
/// thread when a future was asked for (DDP and comm hooks only ever look at the future).
/// Completing waits for every request, runs the copy-out from staging buffers, then
/// marks the Work and its future done or failed with braid's message, prefixed with the op.
class BraidWork : public ::c10d::Work {
 public:
  BraidWork(int rank, ::c10d::OpType type, std::string opName, std::shared_ptr<Communicator> comm,
            double timeoutSeconds, std::weak_ptr<Watcher> watcher);
  ~BraidWork() override;

  /// Set up by the process group before the Work is returned (not thread-safe before that).
  std::vector<Request> requests;
  /// (destination, staged source) pairs copied once every request succeeded.
  std::vector<std::pair<at::Tensor, at::Tensor>> copyOut;
  std::vector<at::Tensor> outputs;    ///< result() and the future's value
  std::vector<at::Tensor> keepAlive;  ///< buffers braid reads or writes until completion
  int sourceRank_ = -1;               ///< recv's peer (recv from any source: once completed)

  /// The work is one recv from any source (requests[0]) into a buffer of `bytes`: completing it
  /// takes the sender for sourceRank(), and a message of another size fails it.
  void expectAnySource(size_t bytes) {
    anySourceBytes_ = bytes;
    anySource_ = true;
  }

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override;
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /// Completes the work unless `deadline` passes first (then returns false and leaves it
  /// running). `userDeadline`: the deadline is the caller's, not ours, so passing it is not an
  /// error of the operation.
  bool complete(Deadline deadline, bool userDeadline);
  /// The deadline used when nobody gave one: a stuck op fails within braid's timeout; this
  /// only bounds a long op still making progress (3 x timeout + 60 s).
  Deadline defaultDeadline() const;
  const std::string& opName() const { return opName_; }

 private:
  std::string opName_;
  std::shared_ptr<Communicator> comm_;
  double timeoutSeconds_;
  std::weak_ptr<Watcher> watcher_;  // weak: the group owns it; a work may outlive the group
  std::timed_mutex completing_;     // held while one thread waits for the requests
  std::mutex stateMutex_;           // guards done_ and future_
  bool done_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool anySource_ = false;
  size_t anySourceBytes_ = 0;
  std::atomic<int> anySourceRank_{-1};  // set by complete(), read by sourceRank() from any thread
};

}  // namespace braid::pytorch
