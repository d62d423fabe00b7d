// The names of braid's vocabulary (braid/types.hpp): one table per enum, its canonical name first
// and then the aliases the parsers also accept. Every name printed or parsed anywhere comes from
// here (nccl-tests' names for types and ops, BRAID_ALGO's for algorithms).
#include <strings.h>

#include "braid/types.hpp"

namespace braid {
namespace {

template <typename T>
struct Named {
  const char* name;
  T value;
};

// The first entry for each value is its canonical name; later ones are aliases.
constexpr Named<DataType> kTypes[] = {
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

constexpr Named<RedOp> kOps[] = {
    {"sum", RedOp::kSum}, {"prod", RedOp::kProd}, {"max", RedOp::kMax},
    {"min", RedOp::kMin}, {"avg", RedOp::kAvg},
};

constexpr Named<Collective> kCollectives[] = {
    {"allreduce", Collective::kAllReduce},     {"reducescatter", Collective::kReduceScatter},
    {"allgather", Collective::kAllGather},     {"broadcast", Collective::kBroadcast},
    {"reduce", Collective::kReduce},           {"send", Collective::kSend},
    {"recv", Collective::kRecv},               {"barrier", Collective::kBarrier},
    {"alltoall", Collective::kAllToAll},       {"alltoallv", Collective::kAllToAllv},
    {"gather", Collective::kGather},           {"scatter", Collective::kScatter},
    {"all_reduce", Collective::kAllReduce},    {"reduce_scatter", Collective::kReduceScatter},
    {"all_gather", Collective::kAllGather},    {"all_to_all", Collective::kAllToAll},
    {"all_to_allv", Collective::kAllToAllv},
};

constexpr Named<Algorithm> kAlgorithms[] = {
    {"auto", Algorithm::kAuto},   {"ring", Algorithm::kRing}, {"oneshot", Algorithm::kOneShot},
    {"chain", Algorithm::kChain}, {"tree", Algorithm::kTree}, {"hier", Algorithm::kHier},
    {"singlecopy", Algorithm::kSingleCopy}, {"direct", Algorithm::kOneShot},
    {"single_copy", Algorithm::kSingleCopy}, {"cma", Algorithm::kSingleCopy},
    {"rankorder", Algorithm::kRankOrder},    {"rank_order", Algorithm::kRankOrder},
    {"pairwise", Algorithm::kPairwise},
};

template <typename T, size_t N>
const char* nameIn(const Named<T> (&table)[N], T value, const char* unknown) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

template <typename T, size_t N>
bool parseIn(const Named<T> (&table)[N], const char* name, T* out) {
  if (name == nullptr) return false;
  for (const auto& entry : table) {
    if (strcasecmp(name, entry.name) == 0) {
      *out = entry.value;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* dataTypeName(DataType type) { return nameIn(kTypes, type, "unknown"); }
const char* redOpName(RedOp op) { return nameIn(kOps, op, "unknown"); }
const char* collectiveName(Collective coll) { return nameIn(kCollectives, coll, "?"); }
const char* algorithmName(Algorithm algo) { return nameIn(kAlgorithms, algo, "?"); }

bool parseDataType(const char* name, DataType* out) { return parseIn(kTypes, name, out); }
bool parseRedOp(const char* name, RedOp* out) { return parseIn(kOps, name, out); }
bool parseCollective(const char* name, Collective* out) {
  return parseIn(kCollectives, name, out);
}
bool parseAlgorithm(const char* name, Algorithm* out) { return parseIn(kAlgorithms, name, out); }

}  // namespace braid
