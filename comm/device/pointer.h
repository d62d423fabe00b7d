// Where a buffer lives (host, pinned host, device, managed) and the argument check the device
// collectives make with it. The classifier is an interface so the check is unit-tested with a
// mock; cudaPointerClassifier() asks the CUDA runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/braid.hpp"

namespace braid::comm::device {

enum class MemoryKind : uint8_t { kHost = 0, kHostPinned = 1, kDevice = 2, kManaged = 3 };
const char* memoryKindName(MemoryKind kind);

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  ///< owning device for kDevice (and kManaged when known); -1 otherwise
};

class PointerClassifier {
 public:
  virtual ~PointerClassifier() = default;
  /// Never throws for an ordinary host pointer (unregistered memory is kHost).
  virtual PointerInfo classify(const void* ptr) const = 0;
};

/// The CUDA runtime's view (cudaPointerGetAttributes); only in builds with CUDA.
const PointerClassifier& cudaPointerClassifier();

/// Throws kInvalidUsage unless `ptr` (the `which` buffer, "send"/"recv") of `bytes` bytes is
/// device or managed memory usable on `device`; the message names rank, collective, buffer, what
/// it is, and the size. A null pointer is accepted only when bytes == 0.
void requireDeviceBuffer(const PointerClassifier& classifier, const void* ptr, size_t bytes,
                         int device, const char* which, int rank, Collective coll);

}  // namespace braid::comm::device
