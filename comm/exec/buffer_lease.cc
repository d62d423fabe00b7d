// The buffer lease (buffer_lease.h).
#include "comm/exec/buffer_lease.h"

#include <chrono>
#include <map>
#include <utility>

#include "common/error.h"
#include "common/log.h"

namespace braid::comm {

std::shared_ptr<BufferLease> BufferLease::of(const std::string& jobId, int rank) {
  static std::mutex registryMutex;
  static std::map<std::pair<std::string, int>, std::weak_ptr<BufferLease>> registry;
  std::lock_guard<std::mutex> lock(registryMutex);
  for (auto it = registry.begin(); it != registry.end();) {  // forget communicators gone
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  std::weak_ptr<BufferLease>& slot = registry[{jobId, rank}];
  std::shared_ptr<BufferLease> lease = slot.lock();
  if (!lease) {
    lease = std::make_shared<BufferLease>();
    slot = lease;
  }
  return lease;
}

uint64_t BufferLease::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  BRAID_ENFORCE(epoch_.load(std::memory_order_relaxed) == 0, ErrorCode::kInternal,
                "buffer lease: opened twice");
  epoch_.store(++lastEpoch_, std::memory_order_relaxed);
  return lastEpoch_;
}

void BufferLease::close(int rank, double warnAfterSeconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (epoch_.load(std::memory_order_relaxed) == 0) return;
  epoch_.store(0, std::memory_order_relaxed);
  // No deadline that gives up: returning while a peer still writes would let the caller free
  // memory under its stores. A borrower only copies (it never blocks) and stops within a block
  // once it sees closing(), so this wait ends; a long one is logged.
  const auto start = std::chrono::steady_clock::now();
  bool warned = false;
  while (borrowers_ > 0) {
    returned_.wait_for(lock, std::chrono::milliseconds(100));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!warned && borrowers_ > 0 && waited > warnAfterSeconds) {
      warned = true;
      BRAID_WARN(
          "rank {}: leaving a single copy, still waiting after {:.0f} s for {} peer "
          "thread(s) copying from or into this rank's buffers",
          rank, waited, borrowers_);
    }
  }
}

bool BufferLease::isOpen() const { return epoch_.load(std::memory_order_relaxed) != 0; }

bool BufferLease::borrow(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch == 0 || epoch_.load(std::memory_order_relaxed) != epoch) return false;
  ++borrowers_;
  return true;
}

void BufferLease::giveBack() {
  std::lock_guard<std::mutex> lock(mutex_);
  BRAID_ENFORCE(borrowers_ > 0, ErrorCode::kInternal, "buffer lease: given back unborrowed");
  if (--borrowers_ == 0) returned_.notify_all();
}

bool BufferLease::closing() const { return epoch_.load(std::memory_order_relaxed) == 0; }

}  // namespace braid::comm
