// braid::memAlloc / memFree (braid.hpp): host buffers peers on this host can map
// (transport/shared_buffer.h), which the mapped single copy reads and writes directly.
#include "braid/braid.hpp"
#include "transport/shared_buffer.h"

namespace braid {

void* memAlloc(size_t bytes) { return transport::allocateShared(bytes); }

void memFree(void* p) { transport::freeShared(p); }

}  // namespace braid
