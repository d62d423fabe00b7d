// A Store in process memory, for ranks that are threads of one process (tests).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/bootstrap/store_base.h"

namespace braid::bootstrap {

/// Thread-safe in-memory Store; share one instance by reference among the rank threads.
/// Blocking calls wait on a condition variable (no polling).
class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  /// Throws kTimeout "... key 'K' ..." when the key is still missing at the deadline.
  std::string get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, std::string> values_;
};

}  // namespace braid::bootstrap
