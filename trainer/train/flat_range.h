// A contiguous slice of a flat float vector (parameters, gradients): a pipeline stage's
// parameters, a parameter server's shard, a part of a --dump-params file.
#pragma once

#include <cstddef>

namespace braid::trainer {

/// Elements [begin, end).
struct FlatRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

}  // namespace braid::trainer
