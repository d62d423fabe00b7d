// Every disagreement about a collective call — its kind, count, element type, op or root — is a
// kMismatch error on every rank, at every size and rank count, never a success on some ranks and
// never a timeout. Ranks run as threads over the real transports (tests/kit/communicators.h); one rank
// (a different one per case) deviates in one field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kit/communicators.h"

namespace braid::faults {
namespace {

using braid::testing::errorCode;
using braid::testing::errorText;
using braid::testing::runRanks;

enum class Field { kCollective, kCount, kType, kOp, kRoot };

const char* fieldName(Field f) {
  switch (f) {
    case Field::kCollective:
      return "collective";
    case Field::kCount:
      return "count";
    case Field::kType:
      return "type";
    case Field::kOp:
      return "op";
    case Field::kRoot:
      return "root";
  }
  return "?";
}

struct Call {
  Collective coll;
  size_t count;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
};

// What the deviating rank calls instead.
Call deviate(Call call, Field field, int n) {
  switch (field) {
    case Field::kCollective:
      call.coll = call.coll == Collective::kAllReduce       ? Collective::kBroadcast
                  : call.coll == Collective::kReduceScatter ? Collective::kAllGather
                  : call.coll == Collective::kAllGather     ? Collective::kAllReduce
                  : call.coll == Collective::kBroadcast     ? Collective::kReduce
                                                            : Collective::kBroadcast;
      break;
    case Field::kCount:
      call.count += 1;
      break;
    case Field::kType:
      call.type = DataType::kFloat64;
      break;
    case Field::kOp:
      call.op = RedOp::kMax;
      break;
    case Field::kRoot:
      call.root = (call.root + 1) % n;
      break;
  }
  return call;
}

void issue(Communicator& comm, const Call& c, const void* in, void* out) {
  switch (c.coll) {
    case Collective::kAllReduce:
      return comm.allReduce(in, out, c.count, c.type, c.op);
    case Collective::kReduceScatter:
      return comm.reduceScatter(in, out, c.count, c.type, c.op);
    case Collective::kAllGather:
      return comm.allGather(in, out, c.count, c.type);
    case Collective::kBroadcast:
      return comm.broadcast(in, out, c.count, c.type, c.root);
    case Collective::kReduce:
      return comm.reduce(in, out, c.count, c.type, c.op, c.root);
    default:
      break;
  }
  throw std::logic_error("mismatch matrix: unexpected collective");
}

struct MatrixParam {
  const char* transport;
  std::vector<int> rankCounts;
  std::vector<size_t> counts;  // elements of float32: 1, 4 KiB, 4 MiB
};

class MismatchMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(MismatchMatrix, EveryFieldEveryCollectiveIsAMismatchOnEveryRank) {
  const MatrixParam& p = GetParam();
  const Collective colls[] = {Collective::kAllReduce, Collective::kReduceScatter,
                              Collective::kAllGather, Collective::kBroadcast, Collective::kReduce};
  const Field fields[] = {Field::kCollective, Field::kCount, Field::kType, Field::kOp,
                          Field::kRoot};
  Options options;
  options.transport = p.transport;
  options.timeoutSeconds = 30;  // a missed mismatch shows as a timeout, far above the bound
  int cases = 0;
  for (int n : p.rankCounts) {
    for (size_t count : p.counts) {
      for (Collective coll : colls) {
        for (Field field : fields) {
          if (field == Field::kOp && !reduces(coll)) continue;
          if (field == Field::kRoot && !isRooted(coll)) continue;
          const int deviant = (cases++ * 5 + 1) % n;
          const Call base{coll, count};
          const Call odd = deviate(base, field, n);
          const std::string what =
              fmt::format("{} ranks, {} of {} elements, rank {} differs in {}", n,
                          collectiveName(coll), count, deviant, fieldName(field));
          std::vector<double> seconds(n, -1);
          auto errors = runRanks(n, options, [&](Communicator& comm) {
            const Call& mine = comm.rank() == deviant ? odd : base;
            // Room for the largest shape (all-gather/reduce-scatter: count x n) in float64.
            const size_t bytes = (mine.count + 1) * size_t(n) * 8;
            std::vector<char> in(bytes, 1), out(bytes, 0);
            const auto start = std::chrono::steady_clock::now();
            try {
              issue(comm, mine, in.data(), out.data());
            } catch (...) {
              seconds[comm.rank()] =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              throw;
            }
          });
          std::string all;  // every rank's outcome, shown when any rank's is wrong
          for (int r = 0; r < n; ++r)
            all +=
                fmt::format("\n  rank {} after {:.3f} s: {}", r, seconds[r], errorText(errors[r]));
          for (int r = 0; r < n; ++r) {
            EXPECT_EQ(errorCode(errors[r]), ErrorCode::kMismatch) << what << ": rank " << r << all;
            EXPECT_LT(seconds[r], 10.0) << what << ": rank " << r << all;
          }
          if (::testing::Test::HasFailure()) return;  // one broken case is enough to read
        }
      }
    }
  }
  RecordProperty("cases", cases);
}

INSTANTIATE_TEST_SUITE_P(
    Threads, MismatchMatrix,
    ::testing::Values(MatrixParam{"shm", {2, 3, 4, 8}, {1, 1024, size_t(1) << 20}},
                      MatrixParam{"tcp", {2, 4}, {1, size_t(1) << 20}},
                      MatrixParam{"ucx", {2, 3}, {1, size_t(1) << 20}}),
    [](const auto& info) { return std::string(info.param.transport); });

}  // namespace
}  // namespace braid::faults
