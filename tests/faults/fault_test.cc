// Faults between rank processes: mismatched calls, a killed peer, a frozen peer, and abort().
// Every failure must reach every surviving rank as an error within a bound, never a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/address.h"
#include "tests/faults/checks.h"
#include "tests/kit/processes.h"

namespace braid::faults {
namespace {

std::string transportName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// ---- 3. Mismatch -------------------------------------------------------------------------------

// Runs `call` on this rank: it must throw kMismatch within 5 s; a rank that may only send
// (`mayReturn`) may instead return, and then its next call (a barrier) must fail within 5 s.
template <typename F>
int expectMismatch(ChildIo& io, Communicator& comm, F&& call, bool mayReturn) {
  const double start = monoNow();
  try {
    call();
  } catch (const Error& e) {
    io.say("first.code", errorCodeName(e.code()));
    io.say("first.msg", e.what());
    io.say("first.secs", fmt::format("{:.3f}", monoNow() - start));
    bool ok = e.code() == ErrorCode::kMismatch && monoNow() - start < 5;
    return ok ? kChildOk : kChildCheckFailed;
  }
  io.say("first", "returned normally");
  if (!mayReturn) return kChildCheckFailed;
  const double next = monoNow();
  try {
    comm.barrier();
  } catch (const Error& e) {
    io.say("next.code", errorCodeName(e.code()));
    io.say("next.msg", e.what());
    io.say("next.secs", fmt::format("{:.3f}", monoNow() - next));
    return monoNow() - next < 5 ? kChildOk : kChildCheckFailed;
  }
  io.say("next", "barrier after the mismatched call returned normally");
  return kChildCheckFailed;
}

class Mismatch : public ::testing::TestWithParam<std::string> {
 protected:
  // Two ranks; body(rank, comm, io) returns the child's code.
  void run(const std::function<int(int, Communicator&, ChildIo&)>& body) {
    Job job(2, bootstrap::findFreePort(),
            {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "30"}});
    job.startAll([&](int rank, ChildIo& io) {
      Communicator comm = Communicator::fromEnvironment();
      return body(rank, comm, io);
    });
    auto results = job.finish(20);
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
};

TEST_P(Mismatch, DifferentCountsFailOnEveryRank) {
  run([](int rank, Communicator& comm, ChildIo& io) {
    const size_t count = rank == 0 ? 1000 : 3000;
    std::vector<float> in(count, 1.0f), out(count);
    return expectMismatch(
        io, comm,
        [&] { comm.allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum); },
        false);
  });
}

TEST_P(Mismatch, DifferentCollectivesFailOnEveryRank) {
  run([](int rank, Communicator& comm, ChildIo& io) {
    std::vector<float> in(1000, 1.0f), out(2000);
    return expectMismatch(
        io, comm,
        [&] {
          if (rank == 0)
            comm.allReduce(in.data(), out.data(), 1000, DataType::kFloat32, RedOp::kSum);
          else
            comm.allGather(in.data(), out.data(), 1000, DataType::kFloat32);
        },
        false);
  });
}

// Each rank believes it is the root, so it only sends: the completion exchange (small) and the
// look at arrivals while blocked (large) still make it a mismatch on both, in the call itself.
TEST_P(Mismatch, DifferentBroadcastRootsFailEveryRank) {
  for (size_t count : {size_t(1000), size_t(4) << 20}) {
    run([count](int rank, Communicator& comm, ChildIo& io) {
      std::vector<int32_t> buf(count, rank);
      return expectMismatch(
          io, comm, [&] { comm.broadcast(buf.data(), buf.data(), count, DataType::kInt32, rank); },
          false);
    });
  }
}

TEST_P(Mismatch, DifferentTypeOrOpFailOnEveryRank) {
  run([](int rank, Communicator& comm, ChildIo& io) {
    std::vector<float> in(1000, 1.0f), out(1000);
    int code = expectMismatch(
        io, comm,
        [&] {
          comm.allReduce(in.data(), out.data(), rank == 0 ? 1000 : 500,
                         rank == 0 ? DataType::kFloat32 : DataType::kFloat64, RedOp::kSum);
        },
        false);
    return code;
  });
}

// Three ranks, only rank 2 differs: ranks that are not its ring neighbours must still get
// kMismatch (not a bare remote error) within 5 s.
TEST_P(Mismatch, OneOfThreeDiffersEveryRankGetsMismatch) {
  Job job(3, bootstrap::findFreePort(), {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "30"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    const size_t count = rank == 2 ? 70000 : 65536;
    std::vector<float> in(count, 1.0f), out(count);
    return expectMismatch(
        io, comm,
        [&] { comm.allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum); },
        false);
  });
  auto results = job.finish(20);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

INSTANTIATE_TEST_SUITE_P(Procs, Mismatch, ::testing::Values("shm", "tcp"), transportName);

// ---- 4. Dead peer ------------------------------------------------------------------------------

// Ranks loop on all-reduces for up to `seconds`, `ready` signals the parent after the first one.
void allReduceLoop(Communicator& comm, ChildIo& io, double seconds) {
  std::vector<float> in(size_t(1) << 18, 1.0f), out(in.size());
  const double end = monoNow() + seconds;
  bool first = true;
  while (monoNow() < end) {
    comm.allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
    if (first) io.signalReady();
    first = false;
  }
}

class DeadPeer : public ::testing::TestWithParam<std::string> {};

TEST_P(DeadPeer, SurvivorsFailWithRemoteErrorWithinThreeSeconds) {
  Job job(3, bootstrap::findFreePort(), {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "30"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    if (rank == 2) {
      allReduceLoop(comm, io, 25);
      return kChildCheckFailed;  // should have been killed
    }
    bool ok = expectError(
        io, "loop", [&] { allReduceLoop(comm, io, 20); }, ErrorCode::kRemoteError, {"peer rank"},
        20);
    return ok ? kChildOk : kChildCheckFailed;
  });
  ASSERT_TRUE(job.waitReady(2, 15)) << "rank 2 never finished its first all-reduce";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double killedAt = monoNow();
  ::kill(job.pid(2), SIGKILL);
  auto results = job.finish(15);
  EXPECT_EQ(results[2].exitCode, -SIGKILL) << results[2].describe();
  for (int r = 0; r < 2; ++r) {
    const ChildResult& res = results[r];
    EXPECT_EQ(res.exitCode, kChildOk) << "rank " << r << ": " << res.describe();
    const std::string msg = res.get("loop.msg");
    // Names the dead rank, or a peer that reported the failure.
    EXPECT_TRUE(msg.find("peer rank 2") != std::string::npos ||
                msg.find("reported") != std::string::npos)
        << "rank " << r << ": " << msg;
    const double took = res.getDouble("loop.t") - killedAt;
    EXPECT_GT(took, 0) << "rank " << r << " failed before the kill: " << res.describe();
    EXPECT_LT(took, 3.0) << "rank " << r << ": " << res.describe();
    RecordProperty(fmt::format("rank{}_seconds_after_kill", r), fmt::format("{:.3f}", took));
  }
}

INSTANTIATE_TEST_SUITE_P(Procs, DeadPeer, ::testing::Values("shm", "tcp"), transportName);

// A rank that never shows up for the rendezvous: the others fail within the timeout. With
// `strict`, the message must also name this rank and the missing one in words.
void missingPeerJob(bool strict) {
  Job job(3, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "2"}});
  job.startAll([strict](int rank, ChildIo& io) {
    if (rank == 2) return kChildOk;  // exits without creating a communicator
    // Rank 0 hosts the store: it waits a little longer, so rank 1 times out on its own rather
    // than seeing the store close (a remote error) when rank 0 gives up first.
    if (rank == 0) setenv("BRAID_TIMEOUT", "3", 1);
    std::vector<std::string> needles = {"2"};
    if (strict) needles = {fmt::format("rank {}", rank), "rank 2"};
    bool ok = expectError(
        io, "init",
        [] {
          Communicator comm = Communicator::fromEnvironment();
          std::vector<float> buf(16, 1.0f);
          comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
        },
        ErrorCode::kTimeout, needles, 6);
    return ok ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(20);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

TEST(MissingPeer, RanksFailWithinTheTimeoutWhenOneNeverJoins) { missingPeerJob(false); }

// When rank 2 never joins, ranks 0 and 1 name themselves and the missing rank.
TEST(MissingPeer, MessageNamesThisRankAndTheMissingRank) { missingPeerJob(true); }

// A peer that leaves cleanly (destroys its communicator and exits) while this rank still calls
// collectives: the next call fails with kRemoteError naming it, quickly, not after the timeout.
TEST(DepartedPeer, NextCallFailsNamingThePeer) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "30"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<float> buf(1 << 16, 1.0f);
    comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    if (rank == 1) return kChildOk;
    ::usleep(200000);  // rank 1 is gone by now
    bool ok = expectError(
        io, "next",
        [&] {
          comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
        },
        ErrorCode::kRemoteError, {"peer rank 1"}, 3);
    return ok ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(20);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

// ---- 5. Frozen peer ----------------------------------------------------------------------------

class FrozenPeer : public ::testing::TestWithParam<std::string> {};

TEST_P(FrozenPeer, TimesOutNamingPeerAndCollective) {
  Job job(2, bootstrap::findFreePort(),
          {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "1.5"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    if (rank == 1) {
      allReduceLoop(comm, io, 25);
      return kChildCheckFailed;  // should have been stopped, then killed
    }
    bool ok = expectError(
        io, "loop", [&] { allReduceLoop(comm, io, 20); }, ErrorCode::kTimeout,
        {"rank 1", "allreduce"}, 20);
    return ok ? kChildOk : kChildCheckFailed;
  });
  ASSERT_TRUE(job.waitReady(1, 15)) << "rank 1 never finished its first all-reduce";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double stoppedAt = monoNow();
  ::kill(job.pid(1), SIGSTOP);
  job.waitExited(0, 10);
  ::kill(job.pid(1), SIGCONT);
  ::kill(job.pid(1), SIGKILL);
  auto results = job.finish(5);
  const ChildResult& res = results[0];
  EXPECT_EQ(res.exitCode, kChildOk) << res.describe();
  const double took = res.getDouble("loop.t") - stoppedAt;
  // The no-progress clock may start a moment before the stop (the last bytes in flight).
  EXPECT_GE(took, 1.4) << res.describe();
  EXPECT_LE(took, 4.0) << res.describe();
  RecordProperty("seconds_after_stop", fmt::format("{:.3f}", took));
}

INSTANTIATE_TEST_SUITE_P(Procs, FrozenPeer, ::testing::Values("shm", "tcp"), transportName);

// ---- 6. abort() --------------------------------------------------------------------------------

class Abort : public ::testing::TestWithParam<std::string> {};

TEST_P(Abort, EndsBlockedCallAndPeerHearsOfIt) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TRANSPORT", GetParam()}, {"BRAID_TIMEOUT", "30"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<float> buf(4096, 0.0f);
    const std::vector<float> before = buf;
    if (rank == 0) {
      // Blocked in a receive that rank 1 never matches (it waits in its own receive).
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        io.say("abort.t", fmt::format("{:.6f}", monoNow()));
        comm.abort();
        comm.abort();  // idempotent
      });
      bool ok = expectError(
          io, "blocked", [&] { comm.recv(buf.data(), buf.size(), DataType::kFloat32, 1); },
          ErrorCode::kAborted, {"rank 0"}, 5);
      aborter.join();
      // Later calls fail too (the communicator is gone), never hang.
      ok = expectError(
               io, "after", [&] { comm.barrier(); }, ErrorCode::kAborted, {}, 1) &&
           ok;
      return ok ? kChildOk : kChildCheckFailed;
    }
    bool ok = expectError(
        io, "peer", [&] { comm.recv(buf.data(), buf.size(), DataType::kFloat32, 0); },
        ErrorCode::kRemoteError, {"rank 0"}, 10);
    return ok ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(20);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  const double abortedAt = results[0].getDouble("abort.t");
  const double blockedEnd = results[0].getDouble("blocked.t") - abortedAt;
  const double peerEnd = results[1].getDouble("peer.t") - abortedAt;
  EXPECT_GE(blockedEnd, 0) << results[0].describe();
  EXPECT_LT(blockedEnd, 1.0) << results[0].describe();
  EXPECT_LT(peerEnd, 5.0) << results[1].describe();
  RecordProperty("blocked_seconds_after_abort", fmt::format("{:.3f}", blockedEnd));
  RecordProperty("peer_seconds_after_abort", fmt::format("{:.3f}", peerEnd));
}

INSTANTIATE_TEST_SUITE_P(Procs, Abort, ::testing::Values("shm", "tcp"), transportName);

// An error during recv() names recv (the wire header says "send" on both sides of a p2p
// message). Both ranks here block in recv() from each other and time out after 1 s.
TEST(PointToPoint, RecvErrorNamesRecv) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "1"}});
  job.startAll([](int rank, ChildIo& io) {
    // Rank 0 times out first; rank 1 (longer timeout) then hears of it as a remote error. Both
    // messages must say recv.
    if (rank == 1) setenv("BRAID_TIMEOUT", "3", 1);
    Communicator comm = Communicator::fromEnvironment();
    std::vector<float> buf(64);
    bool ok = expectError(
        io, "recv", [&] { comm.recv(buf.data(), buf.size(), DataType::kFloat32, 1 - rank); },
        rank == 0 ? ErrorCode::kTimeout : ErrorCode::kRemoteError,
        {"recv", fmt::format("peer rank {}", 1 - rank)}, 4);
    ok = ok && io.said("recv.msg").find("send #") == std::string::npos;
    return ok ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(15);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

}  // namespace
}  // namespace braid::faults
