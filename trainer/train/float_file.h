// --dump-params / --dump-grads: a flat float buffer written raw, and gathered from the ranks that
// hold its parts (pipeline stages, parameter-server shards) first.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/train/flat_range.h"

namespace braid::trainer {

/// Writes `count` floats raw (host float32) to `path`; throws kSystemError naming `flag` and the
/// file when it cannot.
void writeFloatsFile(const std::string& path, const float* data, size_t count, const char* flag);

/// Rank 0 of `comm` receives part p (p >= 1) of `parts` from rank p into `all` and writes all
/// `count` floats of `all` to `path`; rank p sends its part from `mine`. Ranks 0..parts-1 call
/// it (other ranks do nothing in it); rank 0's own part must be in `all` already.
void gatherFloatsFile(Communicator& comm, const std::vector<FlatRange>& parts, const float* mine,
                      float* all, size_t count, const std::string& path, const char* flag);

}  // namespace braid::trainer
