// The vocabulary every layer shares (kernels, schedules, the cost model, wire headers, benches,
// the C++ and C APIs): element types, reduction operators, collectives and algorithms, one enum
// each with one name table (common/vocabulary.cc). Subsets are predicates, not other enums.
// Includes nothing of braid's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

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

/// Collective kinds. Values are stable: every message header carries one (the mismatch check).
enum class Collective : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kReduce = 5,
  kSend = 6,
  kRecv = 7,
  kBarrier = 8,
  kAllToAll = 9,    ///< equal splits: block q of every rank's input goes to rank q
  kAllToAllv = 10,  ///< per-peer counts and displacements (runs all-to-all's schedule shape)
  kGather = 11,     ///< every rank's input to the root, in rank order
  kScatter = 12,    ///< block q of the root's input to rank q
};

/// Collective algorithms. kAuto lets the tuner choose (BRAID_ALGO overrides it); the others name
/// a schedule family. Values are stable (message headers).
enum class Algorithm : uint8_t {
  kAuto = 0,
  kRing = 1,
  kOneShot = 2,  ///< direct: every rank exchanges with every other in one step (small sizes)
  kChain = 3,    ///< pipelined chain (broadcast, reduce)
  kTree = 4,     ///< double binary tree (latency-bound all-reduce)
  kHier = 5,     ///< hierarchical: intra-node reduce-scatter, inter-node all-reduce, all-gather
  /// single copy (all-reduce, ranks of one host): each rank reads its share of every peer's
  /// input where it lies, reduces it and writes the result into every peer's output
  kSingleCopy = 6,
  /// rank order (reductions, any hosts; BRAID_DETERMINISTIC): each block of the buffer goes to
  /// its owner in one exchange, is reduced there in rank order, then shared (reduce: gathered at
  /// the root); the same bits as oneshot and singlecopy, whatever the chunking or transport
  kRankOrder = 7,
  /// pairwise exchange (all-to-all): at step k each rank sends to rank+k and receives from
  /// rank-k, one peer per step and direction (oneshot runs every peer's block at once)
  kPairwise = 8,
};

/// The collectives that have schedules of their own (send, recv and barrier run on others').
constexpr bool isScheduled(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduceScatter ||
         coll == Collective::kAllGather || coll == Collective::kBroadcast ||
         coll == Collective::kReduce || coll == Collective::kAllToAll ||
         coll == Collective::kGather || coll == Collective::kScatter;
}
/// Broadcast, reduce, gather and scatter: a root rank.
constexpr bool isRooted(Collective coll) {
  return coll == Collective::kBroadcast || coll == Collective::kReduce ||
         coll == Collective::kGather || coll == Collective::kScatter;
}
/// The collectives that move blocks between ranks without reducing and that only the direct
/// family runs: all-to-all (equal or per-peer splits), gather, scatter.
constexpr bool onlyDirect(Collective coll) {
  return coll == Collective::kAllToAll || coll == Collective::kAllToAllv ||
         coll == Collective::kGather || coll == Collective::kScatter;
}
/// The collectives that apply a reduction op.
constexpr bool reduces(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduceScatter ||
         coll == Collective::kReduce;
}
/// Point-to-point: send and recv.
constexpr bool isPointToPoint(Collective coll) {
  return coll == Collective::kSend || coll == Collective::kRecv;
}

/// What visitDataType hands out for the 16-bit float types unless the caller names its own.
struct Float16Storage {
  uint16_t bits;
};
struct BFloat16Storage {
  uint16_t bits;
};

/// The one switch over DataType: calls f(T{}) with T the element type of `type` (int8_t,
/// uint8_t, int32_t, uint32_t, int64_t, uint64_t, Half, float, double, BFloat16) and returns
/// what f returns. Half and BFloat16 are the caller's types for the 16-bit floats (kernels pass
/// their codecs, CUDA code its device types, plain byte movers uint16_t). Throws
/// std::invalid_argument for a value outside the enum.
template <typename Half = Float16Storage, typename BFloat16 = BFloat16Storage, typename F>
decltype(auto) visitDataType(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kUint8:
      return f(uint8_t{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kUint32:
      return f(uint32_t{});
    case DataType::kInt64:
      return f(int64_t{});
    case DataType::kUint64:
      return f(uint64_t{});
    case DataType::kFloat16:
      return f(Half{});
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat64:
      return f(double{});
    case DataType::kBFloat16:
      return f(BFloat16{});
  }
  throw std::invalid_argument("invalid data type " + std::to_string(static_cast<unsigned>(type)));
}

/// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* dataTypeName(DataType type);
/// sum prod max min avg.
const char* redOpName(RedOp op);
/// Parses the names above (also "float32", "fp16", "bf16", "float64", "all" is not accepted);
/// returns false on an unknown name.
bool parseDataType(const char* name, DataType* out);
bool parseRedOp(const char* name, RedOp* out);
/// allreduce reducescatter allgather broadcast reduce send recv barrier alltoall alltoallv gather
/// scatter.
const char* collectiveName(Collective coll);
/// auto ring oneshot chain tree hier (BRAID_ALGO's names; "direct" is parsed as oneshot).
const char* algorithmName(Algorithm algo);
bool parseCollective(const char* name, Collective* out);
bool parseAlgorithm(const char* name, Algorithm* out);

}  // namespace braid
