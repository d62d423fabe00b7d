// NCCL's element types and built-in ops as braid's (braid/types.hpp): the values agree, but
// every int is checked first, and NCCL's fp8 types are refused by name.
#pragma once

#include "braid/types.hpp"
#include "nccl.h"

namespace braid::nccl {

/// braid's DataType for `type`; throws an argument error naming `call` and the value.
DataType dataTypeOf(ncclDataType_t type, const char* call);
/// braid's RedOp for a built-in `op` (< ncclNumOps); throws an argument error otherwise.
RedOp builtinOpOf(ncclRedOp_t op, const char* call);

}  // namespace braid::nccl
