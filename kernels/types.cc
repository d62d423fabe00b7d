// Names of data types and reduction ops, as nccl-tests prints them, and their parsers.
#include "braid/types.hpp"

#include <strings.h>

#include <cstring>

namespace braid {
namespace {

struct NamedType {
  const char* name;
  DataType type;
};

// The first entry for each type is its canonical (nccl-tests) name; the rest are aliases.
constexpr NamedType kTypeNames[] = {
    {"int8", DataType::kInt8},       {"uint8", DataType::kUint8},
    {"int32", DataType::kInt32},     {"uint32", DataType::kUint32},
    {"int64", DataType::kInt64},     {"uint64", DataType::kUint64},
    {"half", DataType::kFloat16},    {"float", DataType::kFloat32},
    {"double", DataType::kFloat64},  {"bfloat16", DataType::kBFloat16},
    {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},
    {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},
    {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},
    {"bf16", DataType::kBFloat16},   {"char", DataType::kInt8},
    {"int", DataType::kInt32},
};

constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

}  // namespace

const char* dataTypeName(DataType type) {
  for (const NamedType& t : kTypeNames) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

const char* redOpName(RedOp op) {
  return isValid(op) ? kOpNames[static_cast<unsigned>(op)] : "unknown";
}

bool parseDataType(const char* name, DataType* out) {
  if (name == nullptr) return false;
  for (const NamedType& t : kTypeNames) {
    if (strcasecmp(name, t.name) == 0) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

bool parseRedOp(const char* name, RedOp* out) {
  if (name == nullptr) return false;
  for (unsigned i = 0; i < static_cast<unsigned>(kNumRedOps); ++i) {
    if (strcasecmp(name, kOpNames[i]) == 0) {
      *out = static_cast<RedOp>(i);
      return true;
    }
  }
  return false;
}

}  // namespace braid
