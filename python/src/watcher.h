// The thread that completes works whose futures someone holds, in issue order.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace braid::pytorch {

class BraidWork;

/// Completes queued works one by one (braid runs a communicator's ops in issue order, so
/// waiting for the oldest first never waits longer than needed). Started on the first add().
/// The destructor lets queued works finish (each bounded by its deadline), then joins.
class Watcher {
 public:
  Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;
  ~Watcher();

  void add(c10::intrusive_ptr<BraidWork> work);

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<BraidWork>> queue;
    bool stopping = false;
  };
  static void loop(std::shared_ptr<Shared> shared);

  // Shared with the thread, which may outlive this object when the last owner of the group
  // lets go inside a future callback running on that very thread.
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace braid::pytorch
