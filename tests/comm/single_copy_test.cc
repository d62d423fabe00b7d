// The single-copy all-reduce (comm/exec/single_copy.h): ranks as threads (a peer's memory is a
// pointer) and as processes (process_vm_readv/writev), every dtype x op, in place and out of
// place, odd counts, checked element by element; disagreeing ranks fail with kMismatch; where it
// cannot run, forcing it is a clear error; the tuner takes it from BRAID_SINGLE_COPY_BYTES up.
// The mapped form (braid::memAlloc buffers on every rank): as processes (each having mapped
// every peer's buffers) and as threads, from BRAID_MAPPED_COPY_BYTES; one rank with ordinary
// buffers: the planned algorithm, or the read path when forced. Ranks as threads take the mapped
// form with any buffers, and a rank aborted in it returns only once no peer touches its buffers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
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

// Runs case c with its buffers in memAlloc memory: the input copied in at `offset` bytes into a
// pool (line-unaligned offsets too), the result copied back where runCaseOn checks it. `pool`
// null: buffers of their own, allocated and freed for this case.
std::string runCaseShared(Communicator& comm, const CollectiveCase& c, char* pool, size_t offset) {
  return runCaseOn(comm.rank(), comm.size(), c,
                   [&](std::vector<char>&, std::vector<char>&, const void* send, void* recv) {
                     const size_t bytes = c.count * dataTypeSize(c.type);
                     char* in = pool ? pool + offset : static_cast<char*>(memAlloc(bytes));
                     char* out = c.inPlace ? in
                                 : pool    ? in + bytes + 64
                                           : static_cast<char*>(memAlloc(bytes));
                     std::memcpy(in, send, bytes);
                     comm.allReduce(in, out, c.count, c.type, c.op);
                     std::memcpy(recv, out, bytes);
                     if (!pool) {
                       if (out != in) memFree(out);
                       memFree(in);
                     }
                   });
}

constexpr size_t kPoolBytes = 8 << 20;

// Every case in a pool at an offset of 3 elements, and (`ownToo`) again in buffers of its own.
std::vector<std::string> runMatrixShared(Communicator& comm, const std::vector<CollectiveCase>& cases,
                                         bool ownToo = true) {
  char* pool = static_cast<char*>(memAlloc(kPoolBytes));
  std::vector<std::string> wrong;
  for (const CollectiveCase& c : cases) {
    for (char* where : {pool, static_cast<char*>(nullptr)}) {
      if (!where && !ownToo) continue;
      const std::string problem = runCaseShared(comm, c, where, 3 * dataTypeSize(c.type));
      if (!problem.empty() && wrong.size() < 10) wrong.push_back(problem);
    }
  }
  memFree(pool);
  return wrong;
}

// How many other processes' memAlloc files this process has mapped (/proc/self/maps names them
// "/memfd:braid-<owner's token>-<serial>"): the mapped single copy maps every peer's.
size_t peersMapped() {
  std::ifstream maps("/proc/self/maps");
  const std::string own = fmt::format("/memfd:braid-{:x}-", transport::processToken());
  std::set<std::string> owners;
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("/memfd:braid-");
    if (at == std::string::npos || line.compare(at, own.size(), own) == 0) continue;
    const size_t dash = line.find('-', at + 13);
    owners.insert(line.substr(at, dash - at));
  }
  return owners.size();
}

// Ranks as processes, every rank's buffers memAlloc'd: the mapped single copy from size 0 up
// (BRAID_MAPPED_COPY_BYTES=0), every dtype x op, in place and out of place, odd counts.
class SingleCopyMappedProcesses : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyMappedProcesses, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int ranks = GetParam();
  if (const std::string why = peerMemoryRefused(); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  Job job(ranks, bootstrap::findFreePort(),
          {{"BRAID_MAPPED_COPY_BYTES", "0"}, {"BRAID_TIMEOUT", "30"}, {"BRAID_TRANSPORT", "shm"}});
  job.startAll([ranks](int, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<std::string> wrong =
        runMatrixShared(comm, matrix({1, 7, 1031, (size_t(1) << 18) + 3}));
    // Peers' pools stay mapped here while the communicator lives.
    if (const size_t mapped = peersMapped(); mapped != size_t(ranks - 1)) {
      wrong.push_back(fmt::format("mapped the buffers of {} peers' processes, not {}: the "
                                  "mapped single copy did not run",
                                  mapped, ranks - 1));
    }
    for (const std::string& w : wrong) io.say("wrong", w);
    return wrong.empty() ? kChildOk : kChildWrongData;
  });
  auto results = job.finish(180);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopyMappedProcesses, ::testing::Values(2, 3, 4));

// One rank's buffers are ordinary memory: every rank takes the planned algorithm instead, with
// the right result; and the forced form falls back to reading through process_vm_readv.
TEST(SingleCopyMappedProcessesMixed, OneRankWithOrdinaryBuffersMeansNoneMaps) {
  if (const std::string why = peerMemoryRefused(); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  for (const char* algo : {"auto", "singlecopy"}) {
    Job job(3, bootstrap::findFreePort(),
            {{"BRAID_MAPPED_COPY_BYTES", "0"}, {"BRAID_TIMEOUT", "30"}, {"BRAID_TRANSPORT", "shm"},
             {"BRAID_ALGO", algo}});
    job.startAll([](int rank, ChildIo& io) {
      Communicator comm = Communicator::fromEnvironment();
      std::vector<std::string> wrong;
      for (const CollectiveCase& c : matrix({1031, (size_t(1) << 18) + 3})) {
        const std::string problem =
            rank == 1 ? runCase(comm, c) : runCaseShared(comm, c, nullptr, 0);
        if (!problem.empty() && wrong.size() < 10) wrong.push_back(problem);
      }
      for (const std::string& w : wrong) io.say("wrong", w);
      return wrong.empty() ? kChildOk : kChildWrongData;
    });
    auto results = job.finish(180);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(results[r].exitCode, kChildOk) << algo << " rank " << r << ": "
                                               << results[r].describe();
    }
  }
}

// A peer killed between mapped copies: the others' next call fails naming it, well inside the
// timeout, and their memory (mapped by the dead peer, and its pages mapped here) stays theirs.
TEST(SingleCopyMappedFaults, AKilledPeerFailsTheOthersNamingIt) {
  if (const std::string why = peerMemoryRefused(); !why.empty()) BRAID_SKIP_NO_DEVICE(why);
  Job job(3, bootstrap::findFreePort(),
          {{"BRAID_MAPPED_COPY_BYTES", "0"}, {"BRAID_TIMEOUT", "20"}, {"BRAID_TRANSPORT", "shm"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    constexpr size_t kCount = 1 << 18;
    auto* buf = static_cast<float*>(memAlloc(kCount * sizeof(float)));
    for (size_t i = 0; i < kCount; ++i) buf[i] = float(rank + 1);
    comm.allReduce(buf, buf, kCount, DataType::kFloat32, RedOp::kSum);
    if (buf[kCount - 1] != 6.0f) return kChildWrongData;
    if (peersMapped() != 2) return kChildCheckFailed;
    if (rank == 2) ::raise(SIGKILL);
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 3; ++i) {
        comm.allReduce(buf, buf, kCount, DataType::kFloat32, RedOp::kSum);
      }
      io.say("error", "none");
      return kChildCheckFailed;
    } catch (const Error& e) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      io.say("error", e.what());
      const bool named = std::string(e.what()).find("rank 2") != std::string::npos;
      if (!named || seconds > 15) return kChildCheckFailed;
    }
    for (size_t i = 0; i < kCount; ++i) buf[i] = 1.0f;  // still this process's memory
    memFree(buf);
    return kChildOk;
  });
  auto results = job.finish(60);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
  EXPECT_EQ(results[2].exitCode, -SIGKILL) << results[2].describe();
}

// Ranks as threads of one process map each other's memAlloc buffers the same way (through
// /proc/self/fd), from 1 to 16 ranks.
class SingleCopyMappedThreads : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyMappedThreads, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  Options options;
  options.timeoutSeconds = 60;
  ::setenv("BRAID_MAPPED_COPY_BYTES", "0", 1);
  struct Unset {
    ~Unset() { ::unsetenv("BRAID_MAPPED_COPY_BYTES"); }
  } unset;
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto errors = runRanks(n, options, [&](Communicator& comm) {
    // What benches report for memAlloc buffers: the mapped copy, for all-reduce only.
    const Algorithm planned = comm.chosenAlgorithm(Collective::kAllReduce, 4096);
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 4096, true),
              n > 1 ? Algorithm::kSingleCopy : planned);
    // Ranks as threads need no memAlloc buffers: every address is theirs too.
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 4096, false),
              n > 1 ? Algorithm::kSingleCopy : planned);
    // Between threads the other collectives go by address too (all-to-all does not).
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kReduceScatter, 4096, true),
              n > 1 ? Algorithm::kSingleCopy : planned);
    EXPECT_NE(comm.chosenAlgorithm(Collective::kAllToAll, 4096, true), Algorithm::kSingleCopy);
    // Buffers of their own per case only up to 5 ranks: 16 map 15 peers' anew every case.
    for (const std::string& w : runMatrixShared(comm, matrix({1, 13, 1031, 65537}), n <= 5)) {
      std::lock_guard<std::mutex> lock(mutex);
      wrong.push_back(w);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
  for (size_t i = 0; i < wrong.size() && i < 10; ++i) ADD_FAILURE() << wrong[i];
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopyMappedThreads, ::testing::Values(1, 2, 3, 5, 16));

// Ranks as threads with ordinary buffers: the mapped single copy by address, chosen by default
// (BRAID_ALGO=auto) from BRAID_MAPPED_COPY_BYTES up; here from 0, every dtype x op, in place and
// out of place, odd counts.
class SingleCopyThreadsByAddress : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyThreadsByAddress, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  ::setenv("BRAID_MAPPED_COPY_BYTES", "0", 1);
  struct Unset {
    ~Unset() { ::unsetenv("BRAID_MAPPED_COPY_BYTES"); }
  } unset;
  Options options;
  options.timeoutSeconds = 60;
  runCasesOnThreads(n, [&](int) { return options; }, matrix({0, 1, 13, 1031, 65537}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopyThreadsByAddress, ::testing::Values(2, 3, 7));

// Ranks as threads: all-gather, reduce-scatter and broadcast by address too (each rank reads its
// peers' inputs), from BRAID_MAPPED_COPY_BYTES (here 0), every dtype (x op), in place and out of
// place, odd counts, every root.
class ThreadCopyOthers : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCopyOthers, EveryTypeOpCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  ::setenv("BRAID_MAPPED_COPY_BYTES", "0", 1);
  struct Unset {
    ~Unset() { ::unsetenv("BRAID_MAPPED_COPY_BYTES"); }
  } unset;
  std::vector<CollectiveCase> cases;
  for (DataType type : kAllTypes) {
    for (size_t count : {size_t{1}, size_t{13}, size_t{1031}, size_t{65537}}) {
      for (bool inPlace : {false, true}) {
        cases.push_back({Collective::kAllGather, type, RedOp::kSum, count, inPlace, -1});
        for (int root = 0; root < n; root += std::max(1, n - 1)) {
          cases.push_back({Collective::kBroadcast, type, RedOp::kSum, count, inPlace, root});
        }
        for (RedOp op : kAllOps) {
          cases.push_back({Collective::kReduceScatter, type, op, count, inPlace, -1});
        }
      }
    }
  }
  Options options;
  options.timeoutSeconds = 60;
  runCasesOnThreads(n, [&](int) { return options; }, cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadCopyOthers, ::testing::Values(2, 3, 5));

// Between threads it is chosen from 16 KiB by default (processes with memAlloc buffers: 256 KiB);
// BRAID_MAPPED_COPY_BYTES moves both.
TEST(SingleCopyThreadsThreshold, SixteenKiBByDefaultAndTheVariableMovesIt) {
  Options options;
  options.timeoutSeconds = 30;
  auto errors = runRanks(2, options, [](Communicator& comm) {
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 16 << 10, false),
              Algorithm::kSingleCopy);
    EXPECT_NE(comm.chosenAlgorithm(Collective::kAllReduce, (16 << 10) - 4, false),
              Algorithm::kSingleCopy);
    for (Collective coll :
         {Collective::kAllGather, Collective::kReduceScatter, Collective::kBroadcast}) {
      EXPECT_EQ(comm.chosenAlgorithm(coll, 16 << 10, false), Algorithm::kSingleCopy);
      EXPECT_NE(comm.chosenAlgorithm(coll, (16 << 10) - 4, false), Algorithm::kSingleCopy);
    }
    // The plain copies (all-gather, broadcast) only below 8 MiB; reduce-scatter at any size.
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllGather, (8 << 20) - 4, false),
              Algorithm::kSingleCopy);
    EXPECT_NE(comm.chosenAlgorithm(Collective::kAllGather, 8 << 20, false), Algorithm::kSingleCopy);
    EXPECT_NE(comm.chosenAlgorithm(Collective::kBroadcast, 8 << 20, false), Algorithm::kSingleCopy);
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kReduceScatter, 256 << 20, false),
              Algorithm::kSingleCopy);
  });
  for (const auto& e : errors) EXPECT_EQ(errorText(e), "");
  ::setenv("BRAID_MAPPED_COPY_BYTES", "1M", 1);
  struct Unset {
    ~Unset() { ::unsetenv("BRAID_MAPPED_COPY_BYTES"); }
  } unset;
  errors = runRanks(2, options, [](Communicator& comm) {
    EXPECT_NE(comm.chosenAlgorithm(Collective::kAllReduce, 512 << 10, false),
              Algorithm::kSingleCopy);
    EXPECT_EQ(comm.chosenAlgorithm(Collective::kAllReduce, 1 << 20, false),
              Algorithm::kSingleCopy);
  });
  for (const auto& e : errors) EXPECT_EQ(errorText(e), "");
}

// A rank (a thread) aborted in the middle of a large mapped single copy: its call returns only
// once no peer thread touches its buffers any more (comm/exec/buffer_lease.h). After it returns it
// overwrites its output with a marker, which must survive until its peer's call has returned too;
// the peer fails naming it. Aborts at several delays, so some land while the peer is still writing
// its share into this rank's output (those rounds are counted and printed).
TEST(SingleCopyThreadsFaults, AnAbortedRankReturnsOnlyOnceNoPeerTouchesItsBuffers) {
  constexpr size_t kCount = size_t(16) << 20;  // 64 MiB of float32 per buffer
  constexpr unsigned char kMarker = 0xA5;
  int peerStopped = 0;
  for (int delayUs : {0, 300, 1000, 2000, 3000, 4000, 6000, 9000}) {
    SCOPED_TRACE(fmt::format("abort after {} us", delayUs));
    std::vector<float> in0(kCount, 1.0f), in1(kCount, 2.0f), out0(kCount), out1(kCount);
    std::atomic<bool> peerReturned{false};
    std::string peerError;
    size_t overwritten = 0;
    Options options;
    options.timeoutSeconds = 30;
    auto errors = runRanks(2, options, [&](Communicator& comm) {
      if (comm.rank() == 0) {
        try {
          comm.allReduce(in0.data(), out0.data(), kCount, DataType::kFloat32, RedOp::kSum);
        } catch (const Error& e) {
          peerError = e.what();
        }
        peerReturned = true;
        return;
      }
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
        comm.abort();
      });
      try {
        comm.allReduce(in1.data(), out1.data(), kCount, DataType::kFloat32, RedOp::kSum);
      } catch (const Error&) {
        // aborted: what it returns matters below, not how
      }
      std::memset(out1.data(), kMarker, kCount * sizeof(float));
      while (!peerReturned) std::this_thread::yield();
      const auto* bytes = reinterpret_cast<const unsigned char*>(out1.data());
      for (size_t i = 0; i < kCount * sizeof(float); ++i) overwritten += bytes[i] != kMarker;
      aborter.join();
    });
    for (const auto& e : errors) EXPECT_EQ(errorText(e), "");
    EXPECT_EQ(overwritten, 0u) << "bytes of the aborted rank's output written after it returned";
    if (peerError.find("left the call") != std::string::npos) {
      ++peerStopped;
      EXPECT_NE(peerError.find("peer rank 1"), std::string::npos) << peerError;
    }
  }
  std::printf("rounds in which the peer was stopped mid-copy: %d of 8\n", peerStopped);
}

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
