// PreMulSum on host buffers: each rank multiplies its input by its scalar into a temporary,
// then the collective sums the temporaries.
#pragma once

#include <cstddef>
#include <vector>

#include "comm.h"

namespace braid::nccl {

/// The op's scalar now (read through scalarAt for ncclScalarDevice residence).
double scalarOf(const PreMulSum& op);
/// Fills `out` with `count` elements of `in` times `scalar`, converted as `type` converts;
/// returns out.data().
const void* scaleInto(std::vector<char>& out, const void* in, size_t count, DataType type,
                      double scalar);

}  // namespace braid::nccl
