#include "comm/device/pointer.h"

#include "common/error.h"

namespace braid::comm::device {

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host memory";
    case MemoryKind::kHostPinned:
      return "pinned host memory";
    case MemoryKind::kDevice:
      return "device memory";
    case MemoryKind::kManaged:
      return "managed memory";
  }
  return "unknown memory";
}

void requireDeviceBuffer(const PointerClassifier& classifier, const void* ptr, size_t bytes,
                         int device, const char* which, int rank, Collective coll) {
  if (bytes == 0) return;
  if (ptr == nullptr) {
    fail(ErrorCode::kInvalidUsage, "rank {}: {}: {} buffer is null ({} bytes)", rank,
         collectiveName(coll), which, bytes);
  }
  const PointerInfo info = classifier.classify(ptr);
  switch (info.kind) {
    case MemoryKind::kDevice:
      if (info.device != device) {
        fail(ErrorCode::kInvalidUsage,
             "rank {}: {}: {} buffer of {} bytes is on CUDA device {}, but this communicator "
             "uses device {}",
             rank, collectiveName(coll), which, bytes, info.device, device);
      }
      return;
    case MemoryKind::kManaged:
      return;  // reachable from every device
    case MemoryKind::kHost:
    case MemoryKind::kHostPinned:
      break;
  }
  fail(ErrorCode::kInvalidUsage,
       "rank {}: {}: {} buffer of {} bytes is {}, not CUDA device memory (device collectives "
       "take cudaMalloc'd buffers; use Communicator for host memory)",
       rank, collectiveName(coll), which, bytes, memoryKindName(info.kind));
}

}  // namespace braid::comm::device
