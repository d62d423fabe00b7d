// Rank processes over the real transports (shm and tcp): every collective, in place and out of
// place, odd and large counts, every element checked; and non-blocking requests.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/address.h"
#include "tests/faults/checks.h"
#include "tests/kit/processes.h"
#include "tests/kit/reference.h"

namespace braid::faults {
namespace {

struct DataParam {
  std::string transport;
  int ranks;
};

class ProcessCollectives : public ::testing::TestWithParam<DataParam> {};

// Ring of blocking send/recv: rank 0 sends first, the others receive then forward their own, so
// the ring never waits on itself even when a message exceeds the channel's slots.
std::string sendRecvRing(Communicator& comm, size_t count) {
  using namespace braid::testing;
  const int n = comm.size(), r = comm.rank();
  const DataType t = DataType::kInt32;
  std::vector<char> mine(count * 4), got(count * 4, char(0x5A)), want(count * 4);
  fillInput(t, RedOp::kSum, r, mine.data(), count);
  fillInput(t, RedOp::kSum, (r + n - 1) % n, want.data(), count);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  if (r == 0) {
    comm.send(mine.data(), count, t, next);
    comm.recv(got.data(), count, t, prev);
  } else {
    comm.recv(got.data(), count, t, prev);
    comm.send(mine.data(), count, t, next);
  }
  long bad = firstMismatch(got.data(), want.data(), count, 4);
  if (bad < 0) return "";
  return fmt::format("rank {}: send/recv ring count={}: element {} wrong", r, count, bad);
}

TEST_P(ProcessCollectives, EveryCollectiveMatchesTheReference) {
  const DataParam p = GetParam();
  Job job(p.ranks, bootstrap::findFreePort(),
          {{"BRAID_TRANSPORT", p.transport}, {"BRAID_TIMEOUT", "30"}});
  job.startAll([](int, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    const int n = comm.size();
    std::vector<std::string> wrong;
    auto check = [&](const std::string& problem) {
      if (!problem.empty() && wrong.size() < 20) wrong.push_back(problem);
    };
    for (size_t count : {size_t(1), size_t(7), size_t(1023), (size_t(1) << 20) + 3}) {
      for (bool inPlace : {false, true}) {
        check(testing::runCase(
            comm, {Collective::kAllReduce, DataType::kFloat32, RedOp::kSum, count, inPlace, -1}));
        check(testing::runCase(
            comm, {Collective::kAllReduce, DataType::kInt32, RedOp::kMax, count, inPlace, -1}));
        check(testing::runCase(
            comm, {Collective::kAllReduce, DataType::kBFloat16, RedOp::kAvg, count, inPlace, -1}));
        check(testing::runCase(comm, {Collective::kReduceScatter, DataType::kFloat32, RedOp::kSum,
                                      count, inPlace, -1}));
        check(testing::runCase(
            comm, {Collective::kAllGather, DataType::kInt32, RedOp::kSum, count, inPlace, -1}));
        check(testing::runCase(
            comm, {Collective::kBroadcast, DataType::kInt32, RedOp::kSum, count, inPlace, 1 % n}));
        check(testing::runCase(
            comm, {Collective::kReduce, DataType::kFloat32, RedOp::kSum, count, inPlace, n - 1}));
      }
      check(sendRecvRing(comm, count));
      comm.barrier();
    }
    for (const std::string& w : wrong) io.say("wrong", w);
    return wrong.empty() ? kChildOk : kChildWrongData;
  });
  auto results = job.finish(60);
  for (int r = 0; r < p.ranks; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

INSTANTIATE_TEST_SUITE_P(Procs, ProcessCollectives,
                         ::testing::Values(DataParam{"shm", 2}, DataParam{"shm", 3},
                                           DataParam{"shm", 4}, DataParam{"tcp", 2},
                                           DataParam{"tcp", 3}, DataParam{"tcp", 4}),
                         [](const ::testing::TestParamInfo<DataParam>& info) {
                           return fmt::format("{}_{}ranks", info.param.transport, info.param.ranks);
                         });

// Eight queued all-reduces waited in order, test() polling, and a request dropped unwaited.
TEST(ProcessAsync, QueuedRequestsCompleteInOrderAndUnwaitedDropIsSafe) {
  const int n = 3;
  Job job(n, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "30"}});
  job.startAll([](int, ChildIo& io) {
    using namespace braid::testing;
    Communicator comm = Communicator::fromEnvironment();
    const int n = comm.size(), r = comm.rank();
    const size_t count = 4099;
    const DataType t = DataType::kFloat32;
    std::vector<std::string> wrong;
    auto expectSum = [&](const std::vector<char>& buf, size_t first, const std::string& what) {
      std::vector<char> want(count * 4);
      for (size_t i = 0; i < count; ++i)
        storeExpected(t, RedOp::kSum, n, first + i, want.data(), i);
      long bad = firstMismatch(buf.data(), want.data(), count, 4);
      if (bad >= 0) wrong.push_back(fmt::format("rank {}: {}: element {} wrong", r, what, bad));
    };
    // 1. Eight queued, waited in order.
    std::vector<std::vector<char>> in(8, std::vector<char>(count * 4)),
        out(8, std::vector<char>(count * 4, char(0xA5)));
    std::vector<Request> reqs;
    for (int k = 0; k < 8; ++k) {
      fillInput(t, RedOp::kSum, r, in[k].data(), count, size_t(k) * count);
      reqs.push_back(comm.allReduceAsync(in[k].data(), out[k].data(), count, t, RedOp::kSum));
    }
    for (int k = 0; k < 8; ++k) {
      reqs[k].wait(Deadline::after(20));
      if (reqs[k].status() != ErrorCode::kOk) wrong.push_back(fmt::format("request {} status", k));
      expectSum(out[k], size_t(k) * count, fmt::format("queued request {}", k));
    }
    // 2. test() becomes true without wait().
    std::vector<char> a(count * 4), b(count * 4, char(0xA5));
    fillInput(t, RedOp::kSum, r, a.data(), count, 77);
    Request polled = comm.allReduceAsync(a.data(), b.data(), count, t, RedOp::kSum);
    const double end = monoNow() + 10;
    bool done = false;
    while (!(done = polled.test()) && monoNow() < end) ::usleep(1000);
    if (!done) wrong.push_back("test() never became true within 10 s");
    polled.wait(Deadline::after(5));
    expectSum(b, 77, "polled request");
    // 3. A request destroyed unwaited: its destructor waits, so the result is complete after.
    std::vector<char> c(count * 4), d(count * 4, char(0xA5));
    fillInput(t, RedOp::kSum, r, c.data(), count, 5);
    { Request dropped = comm.allReduceAsync(c.data(), d.data(), count, t, RedOp::kSum); }
    expectSum(d, 5, "dropped request");
    // And the communicator still works.
    std::vector<char> e(count * 4), f(count * 4, char(0xA5));
    fillInput(t, RedOp::kSum, r, e.data(), count, 9);
    comm.allReduce(e.data(), f.data(), count, t, RedOp::kSum);
    expectSum(f, 9, "allReduce after the dropped request");
    for (const std::string& w : wrong) io.say("wrong", w);
    return wrong.empty() ? kChildOk : kChildWrongData;
  });
  auto results = job.finish(30);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

}  // namespace
}  // namespace braid::faults
