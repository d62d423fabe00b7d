// Destroy must not strand peers: a rank that destroys its communicator and exits right after init
// or right after a collective it finished first (all-reduce, broadcast as root, reduce, all-gather,
// reduce-scatter, send) leaves every byte it reported as sent deliverable, and the store it hosts
// (rank 0) outlives the ranks still connecting. Every other rank must complete its matching
// operation with correct data (every element checked) and destroy cleanly. Each trial forks fresh
// rank processes; the leaving rank rotates over the ranks (so it is the store's host in some
// trials) and the others start their operation a little later, so that the leaver is gone before
// they look. BRAID_FAULTS_TRIALS sets the trials per case (default 3).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/address.h"
#include "tests/kit/processes.h"
#include "tests/kit/reference.h"
#include "tests/support/skip.h"
#include "transport/transport.h"

namespace braid::faults {
using namespace braid::testing;
namespace {

enum class Leave { kInit, kAllReduce, kBroadcastRoot, kReduce, kAllGather, kReduceScatter, kSend };

const char* leaveName(Leave leave) {
  switch (leave) {
    case Leave::kInit:
      return "init";
    case Leave::kAllReduce:
      return "allreduce";
    case Leave::kBroadcastRoot:
      return "broadcast_root";
    case Leave::kReduce:
      return "reduce";
    case Leave::kAllGather:
      return "allgather";
    case Leave::kReduceScatter:
      return "reducescatter";
    case Leave::kSend:
      return "send";
  }
  return "?";
}

struct DestroyParam {
  std::string transport;
  int ranks;
  Leave leave;
};

// gtest prints it in failure lines (instead of the object's bytes).
void PrintTo(const DestroyParam& p, std::ostream* os) {
  *os << p.transport << ", " << p.ranks << " ranks, after " << leaveName(p.leave);
}

int trialsFromEnv() {
  const char* env = std::getenv("BRAID_FAULTS_TRIALS");
  return env ? std::max(1, std::atoi(env)) : 3;
}

// The buffers and expected output of one rank's part in `leave`; the root or peer is chosen
// relative to the leaving rank.
struct Case {
  Leave leave;
  int n, rank, leaver;
  size_t count;
  std::vector<float> in, out, want;
  bool checks = true;  // whether this rank's output is defined

  Case(Leave l, int n_, int r, int leaver_, size_t count_)
      : leave(l), n(n_), rank(r), leaver(leaver_), count(count_) {
    using namespace braid::testing;
    const DataType t = DataType::kFloat32;
    const Collective coll = collective();
    in.resize(inputCount(coll, count, n));
    out.assign(outputCount(coll, count, n), -1000.0f);
    fillInput(t, RedOp::kSum, rank, in.data(), in.size());
    checks = leave == Leave::kInit     ? false
             : leave == Leave::kReduce ? rank == reduceRoot()
             : leave == Leave::kSend   ? rank == sendTarget()
                                       : true;
    if (!checks) return;
    const int root = leave == Leave::kReduce ? reduceRoot() : leaver;  // send: the sender
    const std::vector<char> w = expectedOutput(coll, t, RedOp::kSum, count, n, rank, root);
    want.resize(out.size());
    std::memcpy(want.data(), w.data(), w.size());
  }
  // The collective `leave` runs (init: none; its buffers are an all-reduce's, unused).
  Collective collective() const {
    switch (leave) {
      case Leave::kBroadcastRoot:
        return Collective::kBroadcast;
      case Leave::kReduce:
        return Collective::kReduce;
      case Leave::kAllGather:
        return Collective::kAllGather;
      case Leave::kReduceScatter:
        return Collective::kReduceScatter;
      case Leave::kSend:
        return Collective::kSend;
      default:
        return Collective::kAllReduce;
    }
  }
  // Reduce: the leaver is a non-root that returns once its contribution is posted.
  int reduceRoot() const { return (leaver + 1) % n; }
  int sendTarget() const { return (leaver + 1) % n; }

  void run(Communicator& comm) {
    const DataType t = DataType::kFloat32;
    switch (leave) {
      case Leave::kInit:
        break;
      case Leave::kAllReduce:
        comm.allReduce(in.data(), out.data(), count, t, RedOp::kSum);
        break;
      case Leave::kBroadcastRoot:
        comm.broadcast(in.data(), out.data(), count, t, leaver);
        break;
      case Leave::kReduce:
        comm.reduce(in.data(), out.data(), count, t, RedOp::kSum, reduceRoot());
        break;
      case Leave::kAllGather:
        comm.allGather(in.data(), out.data(), count, t);
        break;
      case Leave::kReduceScatter:
        comm.reduceScatter(in.data(), out.data(), count, t, RedOp::kSum);
        break;
      case Leave::kSend:
        if (rank == leaver) comm.send(in.data(), count, t, sendTarget());
        if (rank == sendTarget()) comm.recv(out.data(), count, t, leaver);
        break;
    }
  }

  // "" or the first wrong element.
  std::string check() const {
    if (!checks) return "";
    long bad = braid::testing::firstMismatch(out.data(), want.data(), out.size(), sizeof(float));
    if (bad < 0) return "";
    return fmt::format("rank {}: {} of {} floats (leaver {}): element {} is {}, want {}", rank,
                       leaveName(leave), count, leaver, bad, out[size_t(bad)], want[size_t(bad)]);
  }
};

class DestroyRightAfter : public ::testing::TestWithParam<DestroyParam> {};

TEST_P(DestroyRightAfter, PeersCompleteWithCorrectData) {
  const DestroyParam p = GetParam();
  if (p.transport == "ucx" && !transport::kindAvailable(transport::Kind::kUcx)) {
    BRAID_SKIP_MISSING("this build has no UCX transport (apt-get install libucx-dev)");
  }
  const int trials = trialsFromEnv();
  int failures = 0;
  std::string firstFailure;
  for (int trial = 0; trial < trials; ++trial) {
    const int leaver = trial % p.ranks;
    std::mt19937 pick(unsigned(trial) * 7919u + unsigned(p.leave) * 104729u + unsigned(p.ranks));
    // One slot (eager), or several pieces (they still fit the channel's slots, so the leaver can
    // post them all and go).
    const size_t count = pick() % 2 == 0 ? 1031 : 70001;
    // Mostly the others come a little later, so that the leaver is gone before they look; else
    // the leaver comes later, so that they already wait (asleep) when it posts and leaves.
    const bool leaverLate = pick() % 3 == 0;
    const unsigned seed = pick();
    Job job(p.ranks, bootstrap::findFreePort(),
            {{"BRAID_TRANSPORT", p.transport}, {"BRAID_TIMEOUT", "20"}});
    job.startAll([&](int rank, ChildIo& io) {
      std::optional<Communicator> comm(Communicator::fromEnvironment());
      Case c(p.leave, p.ranks, rank, leaver, count);
      if ((rank == leaver) == leaverLate)
        ::usleep(useconds_t(std::mt19937(seed + unsigned(rank))() % (leaverLate ? 60000 : 3000)));
      c.run(*comm);
      comm.reset();  // destroy, then exit right away (Job's child _exits after the body)
      const std::string wrong = c.check();
      if (!wrong.empty()) io.say("wrong", wrong);
      return wrong.empty() ? kChildOk : kChildWrongData;
    });
    auto results = job.finish(60);
    std::string problem;
    for (int r = 0; r < p.ranks; ++r) {
      if (results[r].exitCode != kChildOk)
        problem += fmt::format("rank {}: {}", r, results[r].describe());
    }
    if (!problem.empty()) {
      ++failures;
      if (firstFailure.empty())
        firstFailure = fmt::format("trial {} (leaver {}{}, {} floats): {}", trial, leaver,
                                   leaverLate ? " late" : "", count, problem);
    }
  }
  std::printf("[ destroy  ] %s, %d ranks, after %s: %d runs, %d failures\n", p.transport.c_str(),
              p.ranks, leaveName(p.leave), trials, failures);
  EXPECT_EQ(failures, 0) << "first failure: " << firstFailure;
}

std::vector<DestroyParam> allParams() {
  std::vector<DestroyParam> out;
  for (const char* transport : {"shm", "tcp", "ucx"})
    for (int ranks : {2, 4})
      for (Leave leave : {Leave::kInit, Leave::kAllReduce, Leave::kBroadcastRoot, Leave::kReduce,
                          Leave::kAllGather, Leave::kReduceScatter, Leave::kSend})
        out.push_back({transport, ranks, leave});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Procs, DestroyRightAfter, ::testing::ValuesIn(allParams()),
                         [](const ::testing::TestParamInfo<DestroyParam>& info) {
                           return fmt::format("{}_{}ranks_{}", info.param.transport,
                                              info.param.ranks, leaveName(info.param.leave));
                         });

}  // namespace
}  // namespace braid::faults
