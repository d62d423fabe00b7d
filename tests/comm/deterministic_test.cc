// BRAID_DETERMINISTIC (Options::deterministic): all-reduce, reduce-scatter and reduce give the
// bits of a reduction in rank order (kernels::reduceMany over every rank's contribution) whatever
// the algorithm (oneshot, singlecopy, rankorder), chunk, lanes or transport; inputs of mixed
// magnitudes make the order matter (ring's result differs), in place and out of place, ranks as
// threads. Forcing an algorithm that does not reduce in rank order is refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kit/communicators.h"

namespace braid::testing {
namespace {

constexpr int kN = 3;
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                               DataType::kFloat64, DataType::kInt32};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kAvg, RedOp::kMax};
constexpr Collective kColls[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                 Collective::kReduce};

// Mixed magnitudes and signs: sums depend on their order. Products stay near 1.
std::vector<char> inputOf(DataType t, RedOp op, int rank, size_t count) {
  std::vector<char> buf(count * dataTypeSize(t) + 1);
  for (size_t i = 0; i < count; ++i) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank + 1) << 40);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    const double unit = double(h % 2001) / 1000.0 - 1.0;  // [-1, 1]
    double v = unit * std::pow(10.0, double(int(h >> 20) % 7) - 3);
    if (op == RedOp::kProd) v = 1.0 + unit / 8;
    if (t == DataType::kInt32) v = double(int64_t(h % 2001) - 1000);
    if (t == DataType::kFloat16 || t == DataType::kBFloat16) v = std::clamp(v, -60000.0, 60000.0);
    kernels::storeElement(t, buf.data(), i, v);
  }
  return buf;
}

// Rank r's expected output: rank-order reduceMany over the ranks' blocks.
std::vector<char> expected(Collective coll, DataType t, RedOp op, size_t count, int r) {
  const size_t e = dataTypeSize(t);
  const size_t inCount = coll == Collective::kReduceScatter ? count * kN : count;
  const size_t offset = coll == Collective::kReduceScatter ? r * count : 0;
  std::vector<std::vector<char>> ins;
  std::vector<const void*> srcs;
  for (int q = 0; q < kN; ++q) ins.push_back(inputOf(t, op, q, inCount));
  for (int q = 0; q < kN; ++q) srcs.push_back(ins[q].data() + offset * e);
  std::vector<char> out(count * e + 1);
  kernels::reduceMany(out.data(), srcs.data(), kN, count, t,
                      op == RedOp::kAvg ? RedOp::kSum : op);
  if (op == RedOp::kAvg) kernels::divide(out.data(), out.data(), count, t, kN);
  return out;
}

// Runs every case on kN ranks with `options`; returns the first few bitwise differences.
std::vector<std::string> differences(const Options& options, const std::vector<size_t>& counts,
                                     bool allReduceOnly = false) {
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto errors = runRanks(kN, options, [&](Communicator& comm) {
    const int r = comm.rank();
    for (Collective coll : kColls) {
      if (allReduceOnly && coll != Collective::kAllReduce) continue;
      for (DataType t : kTypes) {
        for (RedOp op : kOps) {
          for (size_t count : counts) {
            for (bool inPlace : {false, true}) {
              const size_t e = dataTypeSize(t);
              const size_t inCount = coll == Collective::kReduceScatter ? count * kN : count;
              std::vector<char> in = inputOf(t, op, r, inCount);
              std::vector<char> out(count * e + 1, char(0x5A));
              void* recv = out.data();
              if (inPlace) recv = coll == Collective::kReduceScatter ? in.data() + r * count * e
                                                                     : in.data();
              const int root = kN - 1;
              if (coll == Collective::kAllReduce) {
                comm.allReduce(in.data(), recv, count, t, op);
              } else if (coll == Collective::kReduceScatter) {
                comm.reduceScatter(in.data(), recv, count, t, op);
              } else {
                comm.reduce(in.data(), recv, count, t, op, root);
                if (r != root) continue;
              }
              const std::vector<char> want = expected(coll, t, op, count, r);
              if (std::memcmp(recv, want.data(), count * e) != 0) {
                std::lock_guard<std::mutex> lock(mutex);
                if (wrong.size() < 8) {
                  wrong.push_back(fmt::format("rank {}: {} {} {} count={} {}", r,
                                              collectiveName(coll), dataTypeName(t),
                                              redOpName(op), count,
                                              inPlace ? "in place" : "out of place"));
                }
              }
            }
          }
        }
      }
    }
  });
  for (int r = 0; r < kN; ++r) {
    if (errors[r]) wrong.push_back(fmt::format("rank {} threw: {}", r, errorText(errors[r])));
  }
  return wrong;
}

const std::vector<size_t> kSmall = {1, 7, 1031};
const std::vector<size_t> kLarge = {(size_t(1) << 18) + 13};  // past oneshot's 32 KiB per peer

struct Variant {
  const char* name;
  Algorithm algo;
  size_t chunk;
  int channels;
  const char* transport;
  bool small, large, allReduceOnly;
};

class Deterministic : public ::testing::TestWithParam<Variant> {};

TEST_P(Deterministic, RankOrderBitsWhateverTheAlgorithmChunkLanesOrTransport) {
  const Variant v = GetParam();
  Options options;
  options.deterministic = true;
  options.algorithm = v.algo;
  options.chunkBytes = v.chunk;
  options.channels = v.channels;
  options.transport = v.transport;
  options.timeoutSeconds = 60;
  std::vector<size_t> counts;
  if (v.small) counts.insert(counts.end(), kSmall.begin(), kSmall.end());
  if (v.large) counts.insert(counts.end(), kLarge.begin(), kLarge.end());
  for (const std::string& w : differences(options, counts, v.allReduceOnly)) ADD_FAILURE() << w;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, Deterministic,
    ::testing::Values(Variant{"auto", Algorithm::kAuto, 0, 0, "", true, true, false},
                      Variant{"oneshot", Algorithm::kOneShot, 0, 0, "", true, false, false},
                      Variant{"rankorder", Algorithm::kRankOrder, 0, 0, "", true, true, false},
                      Variant{"rankorder_4K_chunk", Algorithm::kRankOrder, 4096, 0, "", true,
                              true, false},
                      Variant{"singlecopy", Algorithm::kSingleCopy, 0, 0, "", true, true, true},
                      Variant{"auto_2_lanes_4K_chunk", Algorithm::kAuto, 4096, 2, "", true, true,
                              false},
                      Variant{"auto_tcp", Algorithm::kAuto, 0, 0, "tcp", true, true, false}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

// The inputs make the order matter: without the mode, ring's sums differ from rank order's
// somewhere (so the test above can fail).
TEST(DeterministicInputs, RingSumsDifferFromRankOrder) {
  Options options;
  options.algorithm = Algorithm::kRing;
  options.chunkBytes = 4096;
  EXPECT_FALSE(differences(options, kLarge, true).empty());
}

TEST(DeterministicUsage, AlgorithmsThatDoNotReduceInRankOrderAreRefused) {
  Options options;
  options.deterministic = true;
  options.algorithm = Algorithm::kRing;
  auto errors = runRanks(2, options, [](Communicator& comm) {
    std::vector<float> in(1 << 16, 1.0f), out(in.size());
    comm.allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage) << errorText(errors[r]);
    EXPECT_NE(errorText(errors[r]).find("does not reduce in rank order"), std::string::npos)
        << errorText(errors[r]);
  }
}

}  // namespace
}  // namespace braid::testing
