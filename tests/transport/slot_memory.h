// Payloads in and out of a backend's slots, for the tests that fill and read them: the slots of
// cuda_ipc are device memory (copied through the CUDA runtime, in builds that have it), every
// other backend's are host memory. Whether this machine has a GPU is asked in a forked child,
// so the test process itself never initialises CUDA before it forks ranks (CUDA does not
// survive fork).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace braid::transport::testing {

/// Whether `kind`'s slots are device memory.
inline bool deviceSlots(Kind kind) { return kind == Kind::kCudaIpc; }

/// Copies n bytes from host memory into a slot of `kind`.
void toSlot(Kind kind, void* slot, const void* src, size_t n);
/// Copies n bytes of a slot of `kind` into host memory.
void fromSlot(Kind kind, const void* slot, void* dst, size_t n);
/// Sets n bytes of a slot to `byte`.
void setSlot(Kind kind, void* slot, int byte, size_t n);
/// "" when device slots can be tested here (a build with CUDA and a GPU, probed in a child),
/// else why not.
std::string deviceSlotsUnavailable();

}  // namespace braid::transport::testing
