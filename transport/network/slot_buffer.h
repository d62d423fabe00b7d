// Slot memory of the network backends' channels (tagged_channels.h): 64-byte aligned, freed with
// free().
#pragma once

#include <cstdlib>
#include <memory>

#include "common/error.h"

namespace braid::transport {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char[], FreeDeleter>;

/// `bytes` rounded up to 64, 64-byte aligned; throws kSystemError naming `backend` on failure.
inline AlignedBuffer allocateSlots(size_t bytes, const char* backend) {
  bytes = (bytes + 63) / 64 * 64;
  auto* p = static_cast<char*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) fail(ErrorCode::kSystemError, "{}: cannot allocate {} bytes of slots", backend, bytes);
  return AlignedBuffer(p);
}

}  // namespace braid::transport
