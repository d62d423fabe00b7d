// The test kit's one reference: seed-free, exactly representable inputs and the closed-form
// result of every collective x dtype x op for any rank count. Small integers, so sums over 16
// ranks are exact in every type (int8 and half included) and any reduction order gives the same
// bits. Host, device and fault tests all check against it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "braid/types.hpp"
#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::testing {

/// Every element type and reduction op, in nccl-tests' order.
constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                  DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                  DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                  DataType::kBFloat16};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
/// The collectives with schedules of their own.
constexpr Collective kScheduledCollectives[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                                Collective::kAllGather, Collective::kBroadcast,
                                                Collective::kReduce};

inline bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 ||
         t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}
inline bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}

/// Input element i of rank r for op `op`.
inline double inputValue(DataType t, RedOp op, int r, size_t i) {
  if (op == RedOp::kProd) {
    // Mostly 1 and -1, a 2 only on ranks 0..3: products stay within every type.
    if (r < 4 && (i + r) % 5 == 0) return 2;
    return (isSigned(t) && (i * 3 + r) % 7 == 0) ? -1 : 1;
  }
  double v = static_cast<double>((i * 7 + r * 13 + 1) % 7);
  return isSigned(t) ? v - 3 : v;
}

/// Stores `v` as element i of a buffer of type t.
inline void store(DataType t, void* buf, size_t i, double v) {
  kernels::storeElement(t, buf, i, v);
}

/// Fills a buffer with rank r's input.
inline void fillInput(DataType t, RedOp op, int r, void* buf, size_t count, size_t first = 0) {
  for (size_t i = 0; i < count; ++i) store(t, buf, i, inputValue(t, op, r, first + i));
}

/// Writes the expected reduction of element i over ranks 0..n-1 into `buf` at index j.
inline void storeExpected(DataType t, RedOp op, int n, size_t i, void* buf, size_t j) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    acc = kernels::applyOp(op, acc, inputValue(t, op, r, i));
  }
  if (op == RedOp::kAvg) {
    if (!isFloat(t)) {
      acc = std::trunc(acc / n);  // integer division truncates toward zero
    } else if (t == DataType::kFloat64) {
      acc = acc / n;
    } else {
      acc = double(float(acc) / float(n));  // float32 division, then rounded to the type
    }
  }
  store(t, buf, j, acc);
}

/// The collectives that move blocks between ranks (one schedule each, the direct family's).
constexpr Collective kExchangeCollectives[] = {Collective::kAllToAll, Collective::kGather,
                                               Collective::kScatter};

/// Elements in the send buffer of `coll` called with the API's `count` (recvCount for
/// reduceScatter and scatter, sendCount for allGather and gather, per peer for allToAll) on n
/// ranks.
inline size_t inputCount(Collective coll, size_t count, int n) {
  const bool blocks = coll == Collective::kReduceScatter || coll == Collective::kScatter ||
                      coll == Collective::kAllToAll;
  return blocks ? count * size_t(n) : count;
}
/// Elements in its receive buffer.
inline size_t outputCount(Collective coll, size_t count, int n) {
  const bool blocks = coll == Collective::kAllGather || coll == Collective::kGather ||
                      coll == Collective::kAllToAll;
  return blocks ? count * size_t(n) : count;
}
/// Whether only the root's receive buffer is defined after `coll`.
inline bool rootOnlyResult(Collective coll) {
  return coll == Collective::kReduce || coll == Collective::kGather;
}
/// The op the inputs are made for: the collective's own where it reduces, else sum's data.
inline RedOp dataOpOf(Collective coll, RedOp op) { return reduces(coll) ? op : RedOp::kSum; }

/// Rank r's send buffer for `coll` (inputCount elements).
inline std::vector<char> rankInput(Collective coll, DataType t, RedOp op, size_t count, int n,
                                   int r) {
  const size_t in = inputCount(coll, count, n);
  std::vector<char> buf(in * dataTypeSize(t));
  fillInput(t, dataOpOf(coll, op), r, buf.data(), in);
  return buf;
}

/// What rank r's receive buffer must hold after `coll` (outputCount elements; a non-root of
/// reduce or gather gets none: its receive buffer is not defined). Send and recv (point to
/// point) expect the sender `root`'s input, as broadcast does.
inline std::vector<char> expectedOutput(Collective coll, DataType t, RedOp op, size_t count, int n,
                                        int r, int root) {
  const size_t out = outputCount(coll, count, n);
  const RedOp dataOp = dataOpOf(coll, op);
  std::vector<char> want(out * dataTypeSize(t));
  switch (coll) {
    case Collective::kReduce:
      if (r != root) return {};
      [[fallthrough]];
    case Collective::kAllReduce:
      for (size_t i = 0; i < out; ++i) storeExpected(t, op, n, i, want.data(), i);
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < out; ++i)
        storeExpected(t, op, n, size_t(r) * count + i, want.data(), i);
      break;
    case Collective::kGather:
      if (r != root) return {};
      [[fallthrough]];
    case Collective::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
          store(t, want.data(), size_t(q) * count + i, inputValue(t, dataOp, q, i));
      break;
    case Collective::kAllToAll:  // block q: rank q's block for r
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
          store(t, want.data(), size_t(q) * count + i,
                inputValue(t, dataOp, q, size_t(r) * count + i));
      break;
    case Collective::kScatter:  // the root's block for r
      for (size_t i = 0; i < out; ++i)
        store(t, want.data(), i, inputValue(t, dataOp, root, size_t(r) * count + i));
      break;
    default:  // broadcast, send/recv: the root's (sender's) input
      for (size_t i = 0; i < out; ++i) store(t, want.data(), i, inputValue(t, dataOp, root, i));
      break;
  }
  return want;
}

/// Byte-exact comparison; returns the index of the first differing element or -1.
inline long firstMismatch(const void* a, const void* b, size_t count, size_t elem) {
  if (count == 0) return -1;  // empty buffers may be null, which memcmp must not see
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  if (std::memcmp(x, y, count * elem) == 0) return -1;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(x + i * elem, y + i * elem, elem) != 0) return long(i);
  return -1;
}

}  // namespace braid::testing
