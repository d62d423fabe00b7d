#include "comm/bootstrap/memory_store.h"

#include "comm/bootstrap/counter.h"
#include "common/error.h"

namespace braid::bootstrap {
namespace {

// Deadline::never() is time_point::max(), which overflows inside wait_until; cap it.
Clock::time_point waitLimit(Deadline deadline) {
  auto cap = Clock::now() + std::chrono::hours(24 * 365);
  return deadline.when() < cap ? deadline.when() : cap;
}

}  // namespace

void InMemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string InMemoryStore::get(const std::string& key, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    if (deadline.expired()) {
      fail(ErrorCode::kTimeout, "in-memory store: key '{}' was not set before the deadline", key);
    }
    changed_.wait_until(lock, waitLimit(deadline));
  }
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta, Deadline deadline) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& text = values_[key];
    std::string why;
    BRAID_ENFORCE(addToCounter(text, delta, &result, &why), ErrorCode::kInvalidUsage,
                  "in-memory store: add('{}', {}): {}", key, delta, why);
    text = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

void InMemoryStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const std::string* missing = nullptr;
    for (const auto& key : keys) {
      if (values_.find(key) == values_.end()) {
        missing = &key;
        break;
      }
    }
    if (missing == nullptr) return;
    if (deadline.expired()) {
      fail(ErrorCode::kTimeout,
           "in-memory store: wait on {} keys timed out; key '{}' was not set before the deadline",
           keys.size(), *missing);
    }
    changed_.wait_until(lock, waitLimit(deadline));
  }
}

}  // namespace braid::bootstrap
