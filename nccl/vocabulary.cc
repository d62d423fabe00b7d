#include "vocabulary.h"

#include <fmt/format.h>

#include "errors.h"

namespace braid::nccl {

DataType dataTypeOf(ncclDataType_t type, const char* call) {
  const int value = int(type);
  if (value == 10 || value == 11) {  // ncclFloat8e4m3, ncclFloat8e5m2 (NCCL 2.24)
    argumentError(fmt::format("{}: data type {} ({}) is not supported by braid", call,
                              value == 10 ? "ncclFloat8e4m3" : "ncclFloat8e5m2", value));
  }
  if (value < 0 || value >= kNumDataTypes) {
    argumentError(fmt::format("{}: unknown data type {} (valid: 0..{})", call, value,
                              kNumDataTypes - 1));
  }
  return static_cast<DataType>(value);
}

RedOp builtinOpOf(ncclRedOp_t op, const char* call) {
  const int value = int(op);
  if (value < 0 || value >= kNumRedOps) {
    argumentError(fmt::format("{}: unknown reduction op {} (built-in: 0..{}, else one made by "
                              "ncclRedOpCreatePreMulSum on this communicator)",
                              call, value, kNumRedOps - 1));
  }
  return static_cast<RedOp>(value);
}

}  // namespace braid::nccl
