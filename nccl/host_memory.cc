// memory.h without CUDA: every buffer is host memory.
#include <cstdlib>
#include <cstring>

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

void* scaledOnStream(const void*, size_t count, DataType, double, const void*, void*) {
  fail(ErrorCode::kInvalidUsage, "PreMulSum of {} elements on device memory: this braid has no CUDA",
       count);
}

void freeOnStream(void*, void*) {}

void copyOnStream(void* dst, const void* src, size_t bytes, void*) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

}  // namespace braid::nccl
