// The abstract rendezvous store is public (braid/store.hpp); here are the limits braid's own
// stores enforce (see store.h for the overview).
#pragma once

#include <cstddef>

#include "braid/store.hpp"

namespace braid::bootstrap {

using Store = braid::Store;

/// Limits every store enforces (the TCP wire protocol bounds its frames by them).
inline constexpr size_t kMaxKeyBytes = 4 << 10;
inline constexpr size_t kMaxValueBytes = 16 << 20;
/// At most this many keys in one wait().
inline constexpr size_t kMaxWaitKeys = 1024;

}  // namespace braid::bootstrap
