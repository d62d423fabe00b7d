#include "bench/perf/names.h"

#include <array>
#include <utility>

namespace braid::bench {
namespace {

constexpr std::array<std::pair<DataType, const char*>, 10> kTypeNames{{
    {DataType::kInt8, "int8"},
    {DataType::kUint8, "uint8"},
    {DataType::kInt32, "int32"},
    {DataType::kUint32, "uint32"},
    {DataType::kInt64, "int64"},
    {DataType::kUint64, "uint64"},
    {DataType::kFloat16, "half"},
    {DataType::kFloat32, "float"},
    {DataType::kFloat64, "double"},
    {DataType::kBFloat16, "bfloat16"},
}};

constexpr std::array<std::pair<RedOp, const char*>, 5> kOpNames{{
    {RedOp::kSum, "sum"},
    {RedOp::kProd, "prod"},
    {RedOp::kMax, "max"},
    {RedOp::kMin, "min"},
    {RedOp::kAvg, "avg"},
}};

constexpr std::array<std::pair<Algorithm, const char*>, 6> kAlgoNames{{
    {Algorithm::kAuto, "auto"},
    {Algorithm::kRing, "ring"},
    {Algorithm::kOneShot, "oneshot"},
    {Algorithm::kChain, "chain"},
    {Algorithm::kTree, "tree"},
    {Algorithm::kHier, "hier"},
}};

template <typename T, size_t N>
const char* nameOf(const std::array<std::pair<T, const char*>, N>& table, T value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

template <typename T, size_t N>
std::optional<T> valueOf(const std::array<std::pair<T, const char*>, N>& table,
                         const std::string& name) {
  for (const auto& [v, n] : table) {
    if (name == n) return v;
  }
  return std::nullopt;
}

}  // namespace

const char* typeName(DataType type) { return nameOf(kTypeNames, type); }
const char* opName(RedOp op) { return nameOf(kOpNames, op); }
const char* algoName(Algorithm algo) { return nameOf(kAlgoNames, algo); }

std::optional<DataType> parseTypeName(const std::string& name) {
  if (auto type = valueOf(kTypeNames, name)) return type;
  // nccl-tests' aliases.
  if (name == "float16") return DataType::kFloat16;
  if (name == "float32") return DataType::kFloat32;
  if (name == "float64") return DataType::kFloat64;
  if (name == "bf16") return DataType::kBFloat16;
  if (name == "char") return DataType::kInt8;
  if (name == "int") return DataType::kInt32;
  return std::nullopt;
}

std::optional<RedOp> parseOpName(const std::string& name) { return valueOf(kOpNames, name); }
std::optional<Algorithm> parseAlgoName(const std::string& name) {
  return valueOf(kAlgoNames, name);
}

const std::vector<DataType>& allTypes() {
  static const std::vector<DataType> types = [] {
    std::vector<DataType> out;
    for (const auto& entry : kTypeNames) out.push_back(entry.first);
    return out;
  }();
  return types;
}

const std::vector<RedOp>& allOps() {
  static const std::vector<RedOp> ops = [] {
    std::vector<RedOp> out;
    for (const auto& entry : kOpNames) out.push_back(entry.first);
    return out;
  }();
  return ops;
}

}  // namespace braid::bench
