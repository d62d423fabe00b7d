// nccl-tests' names for data types, reduction ops, and braid's algorithm names, kept here so the
// bench's pure parts (arguments, table, JSON) link without the communicator.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/braid.hpp"

namespace braid::bench {

/// int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* typeName(DataType type);
/// sum prod max min avg.
const char* opName(RedOp op);
/// auto ring oneshot chain.
const char* algoName(Algorithm algo);

std::optional<DataType> parseTypeName(const std::string& name);
std::optional<RedOp> parseOpName(const std::string& name);
std::optional<Algorithm> parseAlgoName(const std::string& name);

/// Every type / op in nccl-tests' order (what "-d all" / "-o all" run).
const std::vector<DataType>& allTypes();
const std::vector<RedOp>& allOps();

}  // namespace braid::bench
