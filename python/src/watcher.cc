#include "watcher.h"

#include "work.h"

namespace braid::pytorch {

Watcher::Watcher() : shared_(std::make_shared<Shared>()) {}

Watcher::~Watcher() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopping = true;
  }
  shared_->cv.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // destroyed from a callback on the thread itself: it ends on its own
  } else {
    thread_.join();
  }
}

void Watcher::add(c10::intrusive_ptr<BraidWork> work) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->queue.push_back(std::move(work));
  if (!thread_.joinable()) {
    thread_ = std::thread(&Watcher::loop, shared_);
  } else {
    shared_->cv.notify_one();
  }
}

void Watcher::loop(std::shared_ptr<Shared> shared) {
  std::unique_lock<std::mutex> lock(shared->mutex);
  while (true) {
    // Idle until there is work or the group goes away (not a wait on a peer: no deadline).
    shared->cv.wait(lock, [&] { return shared->stopping || !shared->queue.empty(); });
    if (shared->queue.empty()) return;  // stopping and drained
    auto work = std::move(shared->queue.front());
    shared->queue.pop_front();
    lock.unlock();
    work->complete(work->defaultDeadline(), false);
    work.reset();
    lock.lock();
  }
}

}  // namespace braid::pytorch
