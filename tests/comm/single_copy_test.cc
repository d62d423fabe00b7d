// The single-copy all-reduce (comm/exec/single_copy.h): ranks as threads (a peer's memory is a
// pointer) and as processes (process_vm_readv/writev), every dtype x op, in place and out of
// place, odd counts, checked element by element; disagreeing ranks fail with kMismatch; where it
// cannot run, forcing it is a clear error; the tuner takes it from BRAID_SINGLE_COPY_BYTES up.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/bootstrap/address.h"
#include "comm/detail/tuner.h"
#include "comm/exec/single_copy.h"
#include "tests/kit/host_case.h"
#include "tests/kit/processes.h"
#include "tests/support/skip.h"
#include "transport/peer_memory.h"

namespace braid::testing {
namespace {

Options forced() {
  Options options;
  options.algorithm = Algorithm::kSingleCopy;
  options.timeoutSeconds = 30;
  return options;
}

std::vector<CollectiveCase> matrix(const std::vector<size_t>& counts) {
  std::vector<CollectiveCase> cases;
  for (DataType type : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          cases.push_back({Collective::kAllReduce, type, op, count, inPlace, -1});
        }
      }
    }
  }
  return cases;
}

TEST(SingleCopyShares, CoverEveryElementOnceAtLineBoundaries) {
  for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (int n : {1, 2, 3, 5, 16}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1031},
                           size_t{1} << 20}) {
        size_t next = 0;
        for (int r = 0; r < n; ++r) {
          size_t lo, hi;
          comm::SingleCopy::share(count, elem, n, r, &lo, &hi);
          ASSERT_EQ(lo, next) << elem << " " << n << " " << count << " rank " << r;
          ASSERT_LE(lo, hi);
          if (hi < count) {
            ASSERT_EQ(hi * elem % 64, 0u) << "a share ends inside a cache line";
          }
          next = hi;
        }
        ASSERT_EQ(next, count) << elem << " " << n << " " << count;
      }
    }
  }
}

class SingleCopyThreads : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyThreads, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  runCasesOnThreads(n, [](int) { return forced(); }, matrix({0, 1, 2, 13, 1031, 65537}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopyThreads, ::testing::Values(1, 2, 3, 4, 5, 8, 16));

// Shares of several blocks (the 256 KiB pass) with an odd tail, the tuner's own choice once
// BRAID_SINGLE_COPY_BYTES is set (its ranks are threads of this process: they read it at init).
TEST(SingleCopyThreadsLarge, ChosenByTheTunerFromTheThresholdAndCorrect) {
  ::setenv("BRAID_SINGLE_COPY_BYTES", "1M", 1);
  struct Unset {
    ~Unset() { ::unsetenv("BRAID_SINGLE_COPY_BYTES"); }
  } unset;
  Options options;
  options.timeoutSeconds = 60;
  auto chosen = runRanks(2, options, [](Communicator& comm) {
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 4 << 20), Algorithm::kSingleCopy);
    EXPECT_NE(comm.chosenAlgorithm(Collective::kAllReduce, 512 << 10), Algorithm::kSingleCopy);
  });
  for (const auto& e : chosen) EXPECT_EQ(errorText(e), "");
  std::vector<CollectiveCase> cases;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
    const RedOp op = type == DataType::kBFloat16 ? RedOp::kAvg : RedOp::kSum;
    for (bool inPlace : {false, true}) {
      cases.push_back({Collective::kAllReduce, type, op, (size_t(3) << 20) + 5, inPlace, -1});
    }
  }
  runCasesOnThreads(3, [&](int) { return options; }, cases);
}

// Whether a child may read this process's memory as a rank reads a sibling's (neither is the
// other's ancestor, which Yama's ptrace_scope 1 requires): "" or why not.
std::string peerMemoryRefused() {
  const int64_t parent = ::getpid();
  const uint64_t token = transport::processToken();
  const uint64_t probe = reinterpret_cast<uintptr_t>(transport::processProbe());
  const pid_t child = forkChild([&] {
    std::string why;
    return transport::probePeerMemory(parent, probe, token, &why) ? 0 : 1;
  });
  const int code = waitChild(child, Deadline::after(10));
  return code == 0 ? "" : "this machine refuses process_vm_readv between processes (Yama "
                          "ptrace_scope, seccomp): braid falls back to its slots";
}

// Ranks as processes: the peers' memory through process_vm_readv/writev.
class SingleCopyProcesses : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyProcesses, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int ranks = GetParam();
  if (const std::string why = peerMemoryRefused(); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  Job job(ranks, bootstrap::findFreePort(),
          {{"BRAID_ALGO", "singlecopy"}, {"BRAID_TIMEOUT", "30"}, {"BRAID_TRANSPORT", "shm"}});
  job.startAll([](int, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<std::string> wrong;
    for (const CollectiveCase& c : matrix({0, 1, 7, 1031, (size_t(1) << 18) + 3})) {
      const std::string problem = runCase(comm, c);
      if (!problem.empty() && wrong.size() < 10) wrong.push_back(problem);
    }
    for (const std::string& w : wrong) io.say("wrong", w);
    return wrong.empty() ? kChildOk : kChildWrongData;
  });
  auto results = job.finish(120);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopyProcesses, ::testing::Values(2, 3, 4));

TEST(SingleCopyMismatch, RanksThatDisagreeOnTheCountFailOnEveryRank) {
  for (int n : {2, 3}) {
    auto errors = runRanks(n, forced(), [&](Communicator& comm) {
      const size_t count = comm.rank() == n - 1 ? 4097 : 4096;
      std::vector<float> in(count, 1.0f), out(count, 0.0f);
      comm.allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(errorCode(errors[r]), ErrorCode::kMismatch) << "rank " << r << ": "
                                                            << errorText(errors[r]);
    }
  }
}

TEST(SingleCopyUsage, ForcedWhereItCannotRunSaysWhy) {
  Options options = forced();
  options.transport = "tcp";
  auto errors = runRanks(2, options, [&](Communicator& comm) {
    std::vector<float> in(64, 1.0f), out(64);
    comm.allReduce(in.data(), out.data(), 64, DataType::kFloat32, RedOp::kSum);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage) << errorText(errors[r]);
    EXPECT_NE(errorText(errors[r]).find("over tcp, not shared memory"), std::string::npos)
        << errorText(errors[r]);
  }
  // Reduce-scatter has no single-copy form.
  errors = runRanks(2, forced(), [&](Communicator& comm) {
    std::vector<float> in(128, 1.0f), out(64);
    comm.reduceScatter(in.data(), out.data(), 64, DataType::kFloat32, RedOp::kSum);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage) << errorText(errors[r]);
    EXPECT_NE(errorText(errors[r]).find("cannot run reducescatter"), std::string::npos)
        << errorText(errors[r]);
  }
}

TEST(SingleCopyTuner, TakenFromTheThresholdOnlyWhereAvailable) {
  comm::TunerConfig config;
  config.nranks = 4;
  const std::string why = "rank 1 cannot read rank 0's memory: test";
  config.singleCopyWhy = &why;
  config.singleCopyMinBytes = 1 << 20;
  EXPECT_NE(comm::choose(config, Collective::kAllReduce, 4 << 20).family, Algorithm::kSingleCopy);
  EXPECT_NE(comm::explain(config, Collective::kAllReduce, 4 << 20).find(why), std::string::npos);
  config.singleCopy = true;
  EXPECT_EQ(comm::choose(config, Collective::kAllReduce, 4 << 20).family, Algorithm::kSingleCopy)
      << comm::explain(config, Collective::kAllReduce, 4 << 20);
  EXPECT_EQ(comm::choose(config, Collective::kAllReduce, 1 << 20).family, Algorithm::kSingleCopy);
  EXPECT_NE(comm::choose(config, Collective::kAllReduce, (1 << 20) - 64).family,
            Algorithm::kSingleCopy);
  EXPECT_NE(comm::choose(config, Collective::kReduceScatter, 4 << 20).family,
            Algorithm::kSingleCopy);
}

}  // namespace
}  // namespace braid::testing
