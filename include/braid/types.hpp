// Element types and reduction operators: the public vocabulary every layer shares (kernels, wire
// headers, the C++ and C APIs). Includes nothing of braid's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid {

/// Element type of a buffer. Values are stable (C API, wire headers).
enum class DataType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBFloat16 = 9,
};
constexpr int kNumDataTypes = 10;

/// Reduction operator. kAvg reduces as a sum and divides by the rank count once at the end.
enum class RedOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumRedOps = 5;

/// Bytes per element; 0 for a value outside the enum.
constexpr size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

constexpr bool isValid(DataType type) { return static_cast<unsigned>(type) < kNumDataTypes; }
constexpr bool isValid(RedOp op) { return static_cast<unsigned>(op) < kNumRedOps; }

/// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* dataTypeName(DataType type);
/// sum prod max min avg.
const char* redOpName(RedOp op);
/// Parses the names above (also "float32", "fp16", "bf16", "float64", "all" is not accepted);
/// returns false on an unknown name.
bool parseDataType(const char* name, DataType* out);
bool parseRedOp(const char* name, RedOp* out);

}  // namespace braid
