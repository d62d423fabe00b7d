// Descriptors (counts, bus factors) and the seed-based validation, checked against collectives
// simulated here in plain arithmetic.
#include "bench/perf/data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/format/colls.h"

namespace braid::bench {
namespace {

TEST(PerfColls, CountsFollowNcclTestsConventions) {
  Counts ar = collInfo(Collective::kAllReduce).counts(1024, 4, 4);
  EXPECT_EQ(ar.paramCount, 256u);
  EXPECT_EQ(ar.bytes, 1024u);
  Counts ag = collInfo(Collective::kAllGather).counts(100, 4, 4);  // 25 floats -> 6 per rank
  EXPECT_EQ(ag.sendCount, 6u);
  EXPECT_EQ(ag.recvCount, 24u);
  EXPECT_EQ(ag.paramCount, 6u);
  EXPECT_EQ(ag.bytes, 96u);
  EXPECT_EQ(ag.sendInPlaceOffset, 6u);
  Counts rs = collInfo(Collective::kReduceScatter).counts(64, 8, 2);
  EXPECT_EQ(rs.sendCount, 8u);
  EXPECT_EQ(rs.recvCount, 4u);
  EXPECT_EQ(rs.recvInPlaceOffset, 4u);
  EXPECT_EQ(rs.bytes, 64u);
  Counts tiny = collInfo(Collective::kAllGather).counts(8, 4, 4);
  EXPECT_EQ(tiny.paramCount, 0u);
  EXPECT_EQ(tiny.bytes, 0u);
}

TEST(PerfColls, BusFactors) {
  EXPECT_DOUBLE_EQ(collInfo(Collective::kAllReduce).busFactor(4), 1.5);
  EXPECT_DOUBLE_EQ(collInfo(Collective::kAllReduce).busFactor(1), 0.0);
  EXPECT_DOUBLE_EQ(collInfo(Collective::kReduceScatter).busFactor(4), 0.75);
  EXPECT_DOUBLE_EQ(collInfo(Collective::kAllGather).busFactor(8), 0.875);
  EXPECT_DOUBLE_EQ(collInfo(Collective::kBroadcast).busFactor(8), 1.0);
  EXPECT_DOUBLE_EQ(collInfo(Collective::kReduce).busFactor(3), 1.0);
  EXPECT_STREQ(collInfo(Collective::kReduceScatter).name, "reduce_scatter");
  EXPECT_FALSE(collInfo(Collective::kAllGather).hasOp);
  EXPECT_TRUE(collInfo(Collective::kBroadcast).hasRoot);
  EXPECT_THROW(collInfo(Collective::kBarrier), Error);
}

// nccl-tests' alltoall_perf, gather_perf and scatter_perf: busbw = algbw x (n-1)/n; the size is
// the larger buffer (alltoall: either; gather: the root's receive; scatter: the root's send).
TEST(PerfColls, ExchangeCollectivesFollowNcclTests) {
  for (Collective kind : {Collective::kAllToAll, Collective::kGather, Collective::kScatter}) {
    EXPECT_DOUBLE_EQ(collInfo(kind).busFactor(4), 0.75);
    EXPECT_DOUBLE_EQ(collInfo(kind).busFactor(2), 0.5);
    EXPECT_DOUBLE_EQ(collInfo(kind).busFactor(1), 0.0);
    EXPECT_FALSE(collInfo(kind).hasOp);
    EXPECT_EQ(collInfo(kind).hasRoot, kind != Collective::kAllToAll);
  }
  EXPECT_STREQ(collInfo(Collective::kAllToAll).name, "alltoall");
  EXPECT_STREQ(collInfo(Collective::kGather).name, "gather");
  EXPECT_STREQ(collInfo(Collective::kScatter).name, "scatter");
  Counts a2a = collInfo(Collective::kAllToAll).counts(100, 4, 4);  // 25 floats -> 6 per peer
  EXPECT_EQ(a2a.paramCount, 6u);
  EXPECT_EQ(a2a.sendCount, 24u);
  EXPECT_EQ(a2a.recvCount, 24u);
  EXPECT_EQ(a2a.bytes, 96u);
  Counts g = collInfo(Collective::kGather).counts(100, 4, 4);
  EXPECT_EQ(g.sendCount, 6u);
  EXPECT_EQ(g.recvCount, 24u);
  EXPECT_EQ(g.bytes, 96u);
  Counts sc = collInfo(Collective::kScatter).counts(100, 4, 4);
  EXPECT_EQ(sc.sendCount, 24u);
  EXPECT_EQ(sc.recvCount, 6u);
  EXPECT_EQ(sc.bytes, 96u);
}

TEST(PerfData, HalfAndBfloat16Conversions) {
  for (int i = -2048; i <= 2048; ++i) {
    EXPECT_EQ(halfBitsToFloat(floatToHalfBits(static_cast<float>(i))), static_cast<float>(i));
  }
  for (int i = -256; i <= 256; ++i) {
    EXPECT_EQ(bfloat16BitsToFloat(floatToBfloat16Bits(static_cast<float>(i))),
              static_cast<float>(i));
  }
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(1e6f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(2049.0f), 0x6800);  // ties to even: 2048
  EXPECT_EQ(floatToHalfBits(2051.0f), 0x6802);  // ties to even: 2052
  EXPECT_EQ(floatToHalfBits(5.9604645e-8f), 0x0001);
  EXPECT_FLOAT_EQ(halfBitsToFloat(0x0001), 5.9604645e-8f);
  EXPECT_FLOAT_EQ(halfBitsToFloat(floatToHalfBits(1.0f / 3)), 0.333251953125f);
  EXPECT_EQ(floatToBfloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16Bits(257.0f), 0x4380);  // ties to even: 256
}

TEST(PerfData, InputsAreSmallAndVaried) {
  for (int n : {1, 2, 3, 8, 16}) {
    int seen[17] = {};
    for (int r = 0; r < n; ++r) {
      for (uint64_t i = 0; i < 1000; ++i) {
        int64_t v = inputValue(r, i, 7, RedOp::kSum, n);
        ASSERT_GE(v, 0);
        ASSERT_LT(v * n, 128);
        ++seen[v];
        int64_t p = inputValue(r, i, 7, RedOp::kProd, n);
        ASSERT_TRUE(p == 1 || p == 2);
      }
    }
    int distinct = 0;
    for (int v : seen) distinct += v > 0;
    EXPECT_GE(distinct, n <= 8 ? 8 : 4) << "n " << n;
  }
  // The seed changes the data.
  int differ = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    differ += inputValue(0, i, 1, RedOp::kSum, 2) != inputValue(0, i, 2, RedOp::kSum, 2);
  }
  EXPECT_GT(differ, 50);
}

/// Runs `coll` over `n` simulated ranks with float32 in plain arithmetic and returns each rank's
/// receive buffer.
std::vector<std::vector<float>> simulate(const CheckSpec& base, RedOp op, int root) {
  const Counts& c = base.counts;
  const int n = base.nranks;
  std::vector<std::vector<float>> send(n, std::vector<float>(c.sendCount));
  for (int r = 0; r < n; ++r) {
    CheckSpec s = base;
    s.rank = r;
    fillSend(s, send[r].data());
  }
  auto fold = [&](float a, float b) {
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        return a + b;
      case RedOp::kProd:
        return a * b;
      case RedOp::kMax:
        return std::max(a, b);
      case RedOp::kMin:
        return std::min(a, b);
    }
    return a;
  };
  std::vector<std::vector<float>> recv(n, std::vector<float>(c.recvCount, -1.0f));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < c.recvCount; ++i) {
      switch (base.coll->kind) {
        case Collective::kAllReduce:
        case Collective::kReduce: {
          if (base.coll->kind == Collective::kReduce && r != root) break;
          float acc = send[0][i];
          for (int q = 1; q < n; ++q) acc = fold(acc, send[q][i]);
          recv[r][i] = op == RedOp::kAvg ? acc / n : acc;
          break;
        }
        case Collective::kReduceScatter: {
          size_t j = r * c.recvCount + i;
          float acc = send[0][j];
          for (int q = 1; q < n; ++q) acc = fold(acc, send[q][j]);
          recv[r][i] = op == RedOp::kAvg ? acc / n : acc;
          break;
        }
        case Collective::kAllGather:
          recv[r][i] = send[i / c.sendCount][i % c.sendCount];
          break;
        case Collective::kBroadcast:
          recv[r][i] = send[root][i];
          break;
        case Collective::kGather:
          if (r == root) recv[r][i] = send[i / c.sendCount][i % c.sendCount];
          break;
        case Collective::kAllToAll:  // block q of rank r: rank q's block r
          recv[r][i] = send[i / c.paramCount][r * c.paramCount + i % c.paramCount];
          break;
        case Collective::kScatter:
          recv[r][i] = send[root][r * c.recvCount + i];
          break;
        default:
          break;
      }
    }
  }
  return recv;
}

TEST(PerfData, CorrectResultsPassAndCorruptionIsCounted) {
  for (Collective kind : {Collective::kAllReduce, Collective::kReduceScatter,
                          Collective::kAllGather, Collective::kBroadcast, Collective::kReduce,
                          Collective::kAllToAll, Collective::kGather, Collective::kScatter}) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
      for (int n : {1, 3, 4}) {
        const int root = n - 1;
        CheckSpec spec;
        spec.coll = &collInfo(kind);
        spec.counts = spec.coll->counts(4 * 60, 4, n);
        spec.nranks = n;
        spec.root = root;
        spec.type = DataType::kFloat32;
        spec.op = op;
        spec.seed = 99;
        auto recv = simulate(spec, op, root);
        for (int r = 0; r < n; ++r) {
          CheckSpec s = spec;
          s.rank = r;
          SCOPED_TRACE(::testing::Message() << spec.coll->name << " op " << static_cast<int>(op)
                                            << " n " << n << " rank " << r);
          EXPECT_EQ(countWrong(s, recv[r].data()), 0);
          const bool rootOnly = kind == Collective::kReduce || kind == Collective::kGather;
          const bool checked = !rootOnly || r == root;
          recv[r][1] += 0.5f;
          recv[r][spec.counts.recvCount - 1] = -3.0f;
          EXPECT_EQ(countWrong(s, recv[r].data()), checked ? 2 : 0);
          fillPoison(recv[r].data(), DataType::kFloat32, spec.counts.recvCount);
          EXPECT_EQ(countWrong(s, recv[r].data()), checked ? spec.counts.recvCount : 0u);
        }
      }
    }
  }
}

TEST(PerfData, EveryTypeRoundTripsThroughFillAndCheck) {
  // A one-rank all-reduce returns the input: fill, then check that buffer as the result.
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
      CheckSpec spec;
      spec.coll = &collInfo(Collective::kAllReduce);
      spec.type = static_cast<DataType>(t);
      spec.counts = spec.coll->counts(800, dataTypeSize(spec.type), 1);
      spec.op = op;
      std::vector<char> buf(800);
      fillSend(spec, buf.data());
      EXPECT_EQ(countWrong(spec, buf.data()), 0) << "type " << t;
      buf[dataTypeSize(spec.type) * 3 + dataTypeSize(spec.type) - 1] ^= 0x40;
      EXPECT_EQ(countWrong(spec, buf.data()), 1) << "type " << t;
    }
  }
}

}  // namespace
}  // namespace braid::bench
