// The C API (comm/braid.h) over two forked ranks: rank 0 makes the unique id (its rendezvous
// server lives in rank 0's process) and hands it to rank 1 through a pipe.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "comm/bootstrap/address.h"
#include "tests/kit/processes.h"

extern "C" braidResult_t faultsAllReduceRawCodes(const void* sendbuf, void* recvbuf, size_t count,
                                                 int type, int op, braidComm_t comm);

namespace braid::faults {
using namespace braid::testing;
namespace {

// Checks a C call's result; on failure reports the call and braidGetLastError() and returns false.
bool ok(ChildIo& io, const char* what, braidResult_t got, braidResult_t want = braidSuccess) {
  if (got == want) return true;
  io.say("fail", fmt::format("{} returned {} ({}), want {}: {}", what, int(got),
                             braidGetErrorString(got), int(want), braidGetLastError()));
  return false;
}

bool checkSum(ChildIo& io, const std::vector<float>& out, int n, float base, const char* what) {
  for (size_t i = 0; i < out.size(); ++i) {
    // Rank r contributes base + r + i % 13.
    float want = float(n) * (base + float(i % 13)) + float(n * (n - 1) / 2);
    if (out[i] != want) {
      io.say("wrong", fmt::format("{}: element {} is {}, want {}", what, i, out[i], want));
      return false;
    }
  }
  return true;
}

std::vector<float> input(int rank, size_t count, float base) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = base + float(rank) + float(i % 13);
  return v;
}

// braidAllToAll, braidAllToAllv (uneven: rank r sends r + q + 1 elements to q), braidGather and
// braidScatter (root 1), and a gather with root 5 refused naming the root. Element values say
// where they come from: sender * 1000 + position in the sender's buffer.
bool exchangeCalls(ChildIo& io, braidComm_t comm, int rank, int n) {
  auto from = [](int sender, size_t at) { return float(sender * 1000 + int(at)); };
  std::vector<float> in(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = from(rank, i);
  auto expect = [&](const char* what, const std::vector<float>& got, size_t at, float want) {
    if (got[at] == want) return true;
    io.say("wrong", fmt::format("{}: element {} is {}, want {}", what, at, got[at], want));
    return false;
  };
  bool good = true;
  const size_t count = 5;
  std::vector<float> a2a(count * n, -1.0f);
  good = ok(io, "braidAllToAll", braidAllToAll(in.data(), a2a.data(), count, braidFloat32, comm)) &&
         good;
  for (int q = 0; q < n && good; ++q)
    for (size_t i = 0; i < count && good; ++i)
      good = expect("braidAllToAll", a2a, q * count + i, from(q, rank * count + i));
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t inAt = 0, outAt = 0;
  for (int q = 0; q < n; ++q) {
    sc[q] = size_t(rank + q + 1), sd[q] = inAt, inAt += sc[q];
    rc[q] = size_t(q + rank + 1), rd[q] = outAt, outAt += rc[q];
  }
  std::vector<float> v(outAt, -1.0f);
  good = ok(io, "braidAllToAllv",
            braidAllToAllv(in.data(), sc.data(), sd.data(), v.data(), rc.data(), rd.data(),
                           braidFloat32, comm)) &&
         good;
  for (int q = 0; q < n && good; ++q) {
    size_t theirs = 0;  // where q's block for this rank starts in q's buffer
    for (int p = 0; p < rank; ++p) theirs += size_t(q + p + 1);
    for (size_t i = 0; i < rc[q] && good; ++i)
      good = expect("braidAllToAllv", v, rd[q] + i, from(q, theirs + i));
  }
  std::vector<float> gathered(count * n, -1.0f), scattered(count, -1.0f);
  good = ok(io, "braidGather",
            braidGather(in.data(), gathered.data(), count, braidFloat32, 1, comm)) &&
         good;
  for (int q = 0; q < n && good && rank == 1; ++q)
    for (size_t i = 0; i < count && good; ++i)
      good = expect("braidGather", gathered, q * count + i, from(q, i));
  good = ok(io, "braidScatter",
            braidScatter(in.data(), scattered.data(), count, braidFloat32, 1, comm)) &&
         good;
  for (size_t i = 0; i < count && good; ++i)
    good = expect("braidScatter", scattered, i, from(1, rank * count + i));
  good = ok(io, "braidGather(root 5)",
            braidGather(in.data(), gathered.data(), count, braidFloat32, 5, comm),
            braidInvalidUsage) &&
         good;
  const std::string last = braidGetLastError();
  if (last.find("gather") == std::string::npos || last.find("root 5") == std::string::npos) {
    io.say("fail", "braidGetLastError() does not name gather's root 5: " + last);
    good = false;
  }
  return good;
}

TEST(CApi, TwoForkedRanksRunCollectivesAndReportErrors) {
  int idPipe[2];
  ASSERT_EQ(::pipe(idPipe), 0);
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "20"}});
  job.startAll([&](int rank, ChildIo& io) {
    braidUniqueId id;
    if (rank == 0) {
      if (!ok(io, "braidGetUniqueId", braidGetUniqueId(&id))) return kChildCheckFailed;
      if (::write(idPipe[1], &id, sizeof id) != ssize_t(sizeof id)) return kChildCheckFailed;
    } else {
      pollfd p{idPipe[0], POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1 || ::read(idPipe[0], &id, sizeof id) != ssize_t(sizeof id)) {
        io.say("fail", "no unique id from rank 0 within 10 s");
        return kChildCheckFailed;
      }
    }
    const int n = 2;
    braidComm_t comm = nullptr;
    if (!ok(io, "braidCommInitRank", braidCommInitRank(&comm, n, id, rank)))
      return kChildCheckFailed;
    int gotRank = -1, gotSize = -1;
    bool good = ok(io, "braidCommRank", braidCommRank(comm, &gotRank)) &&
                ok(io, "braidCommSize", braidCommSize(comm, &gotSize));
    if (gotRank != rank || gotSize != n) {
      io.say("fail", fmt::format("rank/size {}/{} want {}/{}", gotRank, gotSize, rank, n));
      good = false;
    }
    const size_t count = 10007;
    // Blocking all-reduce.
    auto in = input(rank, count, 1.0f);
    std::vector<float> out(count, -1.0f);
    good = ok(io, "braidAllReduce",
              braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm)) &&
           checkSum(io, out, n, 1.0f, "braidAllReduce") && good;
    // Non-blocking: poll with braidTest until done, then braidWait and free.
    auto in2 = input(rank, count, 5.0f);
    std::vector<float> out2(count, -1.0f);
    braidRequest_t req = nullptr;
    good = ok(io, "braidAllReduceAsync",
              braidAllReduceAsync(in2.data(), out2.data(), count, braidFloat32, braidSum, comm,
                                  &req)) &&
           good;
    if (req) {
      const double end = monoNow() + 10;
      braidResult_t t = braidInProgress;
      while ((t = braidTest(req)) == braidInProgress && monoNow() < end) ::usleep(1000);
      good = ok(io, "braidTest", t) && good;
      good = ok(io, "braidWait", braidWait(req, 5.0)) && good;
      good = ok(io, "braidRequestFree", braidRequestFree(req)) && good;
      good = checkSum(io, out2, n, 5.0f, "braidAllReduceAsync") && good;
    }
    good = exchangeCalls(io, comm, rank, n) && good;
    // An error return: root 99 is out of range; nothing touched; message names the problem.
    std::vector<float> keep(count, 3.0f);
    good = ok(io, "braidBroadcast(root 99)",
              braidBroadcast(keep.data(), keep.data(), count, braidFloat32, 99, comm),
              braidInvalidUsage) &&
           good;
    const std::string last = braidGetLastError();
    io.say("lastError", last);
    if (last.find("99") == std::string::npos || last.find("root") == std::string::npos) {
      io.say("fail", "braidGetLastError() does not name root 99: " + last);
      good = false;
    }
    for (float v : keep) good = good && v == 3.0f;
    std::fill(out.begin(), out.end(), -1.0f);
    good = ok(io, "braidAllReduce after errors",
              braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm)) &&
           checkSum(io, out, n, 1.0f, "braidAllReduce after errors") && good;
    if (std::string(braidGetLastError()) != "") {
      io.say("fail", std::string("braidGetLastError() not cleared: ") + braidGetLastError());
      good = false;
    }
    good = ok(io, "braidCommDestroy", braidCommDestroy(comm)) && good;
    return good ? kChildOk : kChildCheckFailed;
  });
  ::close(idPipe[0]);
  ::close(idPipe[1]);
  auto results = job.finish(40);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

// Type 42 and op 42 from a C caller return braidInvalidUsage naming the value, leaving the
// buffers alone (the C enums span every int, so this is defined behaviour, UBSan included).
TEST(CApi, UnknownTypeAndOpFromCAreInvalidUsage) {
  int idPipe[2];
  ASSERT_EQ(::pipe(idPipe), 0);
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "20"}});
  job.startAll([&](int rank, ChildIo& io) {
    braidUniqueId id;
    if (rank == 0) {
      if (!ok(io, "braidGetUniqueId", braidGetUniqueId(&id))) return kChildCheckFailed;
      if (::write(idPipe[1], &id, sizeof id) != ssize_t(sizeof id)) return kChildCheckFailed;
    } else {
      pollfd p{idPipe[0], POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1 || ::read(idPipe[0], &id, sizeof id) != ssize_t(sizeof id))
        return kChildCheckFailed;
    }
    braidComm_t comm = nullptr;
    if (!ok(io, "braidCommInitRank", braidCommInitRank(&comm, 2, id, rank)))
      return kChildCheckFailed;
    const size_t count = 1000;
    auto in = input(rank, count, 1.0f);
    std::vector<float> out(count, -1.0f);
    bool good = ok(io, "allreduce type 42",
                   faultsAllReduceRawCodes(in.data(), out.data(), count, 42, braidSum, comm),
                   braidInvalidUsage);
    good = good && std::string(braidGetLastError()).find("42") != std::string::npos;
    good = ok(io, "allreduce op 42",
              faultsAllReduceRawCodes(in.data(), out.data(), count, braidFloat32, 42, comm),
              braidInvalidUsage) &&
           good;
    good = good && std::string(braidGetLastError()).find("42") != std::string::npos;
    for (float v : out) good = good && v == -1.0f;
    good = ok(io, "braidAllReduce after errors",
              braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm)) &&
           checkSum(io, out, 2, 1.0f, "braidAllReduce after errors") && good;
    good = ok(io, "braidCommDestroy", braidCommDestroy(comm)) && good;
    return good ? kChildOk : kChildCheckFailed;
  });
  ::close(idPipe[0]);
  ::close(idPipe[1]);
  auto results = job.finish(40);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

// braidCommAbort from another thread while a collective runs (the use braid.h documents) must end
// that call with braidAborted and never free the communicator under it. Each trial: rank 0's
// worker thread runs one all-reduce, its main thread aborts after a random delay; odd trials
// keep rank 1 out for 100 ms (rank 0 aborts while spinning or asleep on its doorbell), even
// trials move 32 MiB (abort mid-transfer). BRAID_FAULTS_TRIALS sets the trials per transport.
class CApiAbort : public ::testing::TestWithParam<const char*> {};

TEST_P(CApiAbort, FromAnotherThreadEndsTheCallWithAborted) {
  const char* env = std::getenv("BRAID_FAULTS_TRIALS");
  const int trials = env ? std::max(1, std::atoi(env)) : 6;
  int aborted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const bool peerLate = trial % 2 == 1;
    const int delayUs = int(std::mt19937(unsigned(trial) * 7919u)() % (peerLate ? 60000 : 20000));
    Job job(2, bootstrap::findFreePort(),
            {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "20"}});
    job.startAll([&](int rank, ChildIo& io) {
      braidComm_t comm = nullptr;
      if (!ok(io, "braidCommInitFromEnv", braidCommInitFromEnv(&comm))) return kChildCheckFailed;
      const size_t count = peerLate ? 1024 : (size_t(32) << 20) / sizeof(float);
      auto in = input(rank, count, 1.0f);
      std::vector<float> out(count, -1.0f);
      if (rank == 1) {
        if (peerLate) ::usleep(100000);
        braidResult_t got =
            braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm);
        io.say("peer", braidGetErrorString(got));
        bool good = got == braidSuccess || got == braidAborted || got == braidRemoteError;
        if (!good) io.say("fail", fmt::format("peer got {}: {}", int(got), braidGetLastError()));
        if (got == braidSuccess) good = checkSum(io, out, 2, 1.0f, "peer all-reduce");
        good = ok(io, "braidCommDestroy", braidCommDestroy(comm)) && good;
        return good ? kChildOk : kChildCheckFailed;
      }
      std::atomic<bool> entered{false};
      braidResult_t got = braidInternalError;
      std::string message;
      std::thread caller([&] {
        entered = true;
        got = braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm);
        message = braidGetLastError();
      });
      while (!entered) std::this_thread::yield();
      ::usleep(useconds_t(200 + delayUs));
      const double t0 = monoNow();
      const braidResult_t abortResult = braidCommAbort(comm);
      caller.join();
      io.say("returnedAfter", std::to_string(monoNow() - t0));
      io.say("call", braidGetErrorString(got));
      bool good = ok(io, "braidCommAbort", abortResult);
      if (got == braidAborted) {
        if (message.find("abort") == std::string::npos) {
          io.say("fail", "the aborted call's message does not say so: " + message);
          good = false;
        }
      } else if (got == braidSuccess) {
        good = checkSum(io, out, 2, 1.0f, "all-reduce finished before the abort") && good;
      } else {
        io.say("fail", fmt::format("call returned {}, want braidAborted: {}", int(got), message));
        good = false;
      }
      return good ? kChildOk : kChildCheckFailed;
    });
    auto results = job.finish(60);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(results[r].exitCode, kChildOk)
          << GetParam() << " trial " << trial << " (delay " << delayUs << " us), rank " << r << ": "
          << results[r].describe();
    }
    if (results[0].get("call") == braidGetErrorString(braidAborted)) ++aborted;
  }
  // The delays are chosen so that the abort lands inside the call; most trials must show it.
  EXPECT_GE(aborted, (trials + 1) / 2) << "trials whose call the abort ended";
}

INSTANTIATE_TEST_SUITE_P(Procs, CApiAbort, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

// braidCommRank/braidCommSize refuse NULL output pointers (and a NULL communicator) with
// braidInvalidUsage instead of crashing; C dtype/op values of 256 and above are refused whole,
// not cut to 8 bits (263 would run as float32, 258 as max).
TEST(CApi, NullPointersAndWideCodesAreInvalidUsage) {
  Job job(1, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "20"}});
  job.startAll([&](int rank, ChildIo& io) {
    braidComm_t comm = nullptr;
    if (!ok(io, "braidCommInitFromEnv", braidCommInitFromEnv(&comm))) return kChildCheckFailed;
    int value = -7;
    bool good = ok(io, "braidCommRank(NULL)", braidCommRank(comm, nullptr), braidInvalidUsage);
    good = ok(io, "braidCommSize(NULL)", braidCommSize(comm, nullptr), braidInvalidUsage) && good;
    good = ok(io, "braidCommRank(NULL comm)", braidCommRank(nullptr, &value), braidInvalidUsage) &&
           good;
    good = value == -7 && good;
    // braidCommDump: into a buffer (truncated, NUL-terminated); a 0-byte buffer is refused.
    char report[64];
    good = ok(io, "braidCommDump", braidCommDump(comm, report, sizeof report)) && good;
    if (std::string(report).rfind("braid status: rank 0 of 1", 0) != 0) {
      io.say("fail", fmt::format("braidCommDump wrote '{}'", report));
      good = false;
    }
    good = ok(io, "braidCommDump(size 0)", braidCommDump(comm, report, 0), braidInvalidUsage) &&
           good;
    good = ok(io, "braidCommDump(NULL comm)", braidCommDump(nullptr, report, sizeof report),
              braidInvalidUsage) &&
           good;
    std::vector<float> in(100, 1.0f), out(100, -1.0f);
    for (int code : {256 + 7, 1 << 20, -1}) {
      good = ok(io, fmt::format("allreduce type {}", code).c_str(),
                faultsAllReduceRawCodes(in.data(), out.data(), in.size(), code, braidSum, comm),
                braidInvalidUsage) &&
             good;
      good =
          good && std::string(braidGetLastError()).find(std::to_string(code)) != std::string::npos;
      good = ok(io, fmt::format("allreduce op {}", code).c_str(),
                faultsAllReduceRawCodes(in.data(), out.data(), in.size(), braidFloat32,
                                        code == 263 ? 258 : code, comm),
                braidInvalidUsage) &&
             good;
    }
    for (float v : out) good = good && v == -1.0f;
    good = ok(io, "braidCommDestroy", braidCommDestroy(comm)) && good;
    return good ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(30);
  EXPECT_EQ(results[0].exitCode, kChildOk) << results[0].describe();
}

}  // namespace
}  // namespace braid::faults
