// The abstract rendezvous store (see store.h for the overview).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "transport/transport.h"

namespace braid::bootstrap {

/// Limits every store enforces (the TCP wire protocol bounds its frames by them).
inline constexpr size_t kMaxKeyBytes = 4 << 10;
inline constexpr size_t kMaxValueBytes = 16 << 20;
/// At most this many keys in one wait().
inline constexpr size_t kMaxWaitKeys = 1024;

/// A key-value map shared by the ranks of one job. set() overwrites; get() blocks until the key
/// exists. Implementations are thread-safe.
class Store : public transport::KeyValue {
 public:
  /// Atomically adds `delta` to the integer stored at `key` (a missing key counts as 0) and
  /// returns the new value. The value is stored as decimal text, so get() on it returns e.g.
  /// "3". Throws kInvalidUsage when the key holds something that is not an integer, or when the
  /// sum does not fit 64 bits (the value then stays as it was).
  virtual int64_t add(const std::string& key, int64_t delta, Deadline deadline) = 0;
  /// Blocks until every key in `keys` is set; throws kTimeout naming the first missing key when
  /// the deadline passes.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
};

}  // namespace braid::bootstrap
