#include "c10d_store.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace braid::pytorch {

C10dStore::C10dStore(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {}

void C10dStore::set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    fail(ErrorCode::kSystemError, "c10d store: set '{}' ({} bytes) failed: {}", key, value.size(),
         e.what());
  }
}

std::string C10dStore::get(const std::string& key, Deadline deadline) {
  wait({key}, deadline);
  try {
    auto bytes = store_->get(key);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    fail(ErrorCode::kSystemError, "c10d store: get '{}' failed: {}", key, e.what());
  }
}

int64_t C10dStore::add(const std::string& key, int64_t delta, Deadline deadline) {
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    fail(ErrorCode::kSystemError, "c10d store: add {} to '{}' failed: {}", delta, key, e.what());
  }
}

void C10dStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  if (keys.empty()) return;
  // c10d reads a zero timeout as "no timeout": never hand it one.
  const auto timeout = std::chrono::milliseconds(std::max(1, deadline.millisLeft()));
  try {
    store_->wait(keys, timeout);
  } catch (const std::exception& e) {
    // c10d does not say which key was missing; name the first one that still is.
    std::string missing = keys.front();
    try {
      for (const auto& key : keys) {
        if (!store_->check({key})) {
          missing = key;
          break;
        }
      }
    } catch (const std::exception&) {
    }
    fail(ErrorCode::kTimeout, "c10d store: key '{}' not set within {} ms ({})", missing,
         timeout.count(), e.what());
  }
}

}  // namespace braid::pytorch
