// memory.h without CUDA: every buffer is host memory.
#include <cstdlib>

#include "common/error.h"
#include "memory.h"

namespace braid::nccl {

bool isDeviceMemory(const void*) { return false; }
int currentDevice() { return -1; }

void* allocateBuffer(size_t bytes) {
  void* ptr = std::malloc(bytes == 0 ? 1 : bytes);
  BRAID_ENFORCE(ptr != nullptr, ErrorCode::kSystemError, "ncclMemAlloc of {} bytes: out of memory",
                bytes);
  return ptr;
}

void freeBuffer(void* ptr) { std::free(ptr); }

}  // namespace braid::nccl
