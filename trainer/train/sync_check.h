// The --check-sync debug check: every rank must hold bit-identical parameters after a step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/braid.hpp"

namespace braid::trainer {

/// 64-bit FNV-1a over the bytes of `count` floats.
uint64_t hashFloats(const float* data, size_t count);

/// Hashes `params` and compares the hash across ranks with one allReduce (min of the hash and of
/// its complement, i.e. min and max). Collective. Throws Error(kMismatch) naming `step` and this
/// rank's hash when the ranks differ.
void checkParamsInSync(Communicator& comm, const float* params, size_t count, int64_t step);

}  // namespace braid::trainer
