// ncclMemAlloc / ncclMemFree.
#include "memory.h"

#include "errors.h"
#include "export.h"

using namespace braid::nccl;

extern "C" ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guard([&] {
    if (ptr == nullptr) argumentError("ncclMemAlloc: ptr is NULL");
    *ptr = allocateBuffer(size);
  });
}
BRAID_NCCL_ALIAS(ncclMemAlloc)

extern "C" ncclResult_t ncclMemFree(void* ptr) {
  return guard([&] {
    if (ptr != nullptr) freeBuffer(ptr);
  });
}
BRAID_NCCL_ALIAS(ncclMemFree)
