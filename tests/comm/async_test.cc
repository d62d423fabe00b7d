// Non-blocking collectives as threads: many requests in flight, waited in any order, polled,
// mixed with blocking calls and abandoned unwaited; the progress thread and the waiting threads
// hand ops to each other (run under -DBRAID_TSAN=ON too).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tests/comm/abort_check.h"
#include "tests/kit/communicators.h"

namespace braid::testing {
namespace {

TEST(Async, ManyRequestsInFlightCompleteInIssueOrderWithCorrectData) {
  constexpr int kRanks = 3, kOps = 40;
  constexpr size_t kCount = 1000;
  Options options;
  options.timeoutSeconds = 30;
  auto errors = runRanks(kRanks, options, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::vector<int32_t>> in(kOps), out(kOps);
    std::vector<Request> requests;
    for (int k = 0; k < kOps; ++k) {
      in[k].assign(kCount + k * 97, k + r);  // sizes cross the direct/ring threshold
      out[k].assign(in[k].size(), -1);
      requests.push_back(comm.allReduceAsync(in[k].data(), out[k].data(), in[k].size(),
                                             DataType::kInt32, RedOp::kSum));
      if (k % 7 == 3) {
        // A blocking call in between queues behind the requests already issued.
        int32_t one = 1, total = 0;
        comm.allReduce(&one, &total, 1, DataType::kInt32, RedOp::kSum);
        EXPECT_EQ(total, kRanks);
      }
    }
    // Wait the second half in reverse order, poll the first half.
    for (int k = kOps - 1; k >= kOps / 2; --k) requests[k].wait(Deadline::after(30));
    for (int k = 0; k < kOps / 2; ++k) {
      auto until = Clock::now() + std::chrono::seconds(30);
      while (!requests[k].test() && Clock::now() < until) std::this_thread::yield();
      EXPECT_EQ(requests[k].status(), ErrorCode::kOk);
    }
    const int32_t base = kRanks * (kRanks - 1) / 2;
    for (int k = 0; k < kOps; ++k) {
      for (size_t i = 0; i < out[k].size(); ++i) {
        ASSERT_EQ(out[k][i], kRanks * k + base) << "rank " << r << " op " << k << " elem " << i;
      }
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

TEST(Async, ProgressThreadFinishesOpsNobodyWaitsFor) {
  constexpr int kRanks = 2;
  Options options;
  options.timeoutSeconds = 30;
  auto errors = runRanks(kRanks, options, [&](Communicator& comm) {
    std::vector<float> buf(50000, 1.0f);
    Request request =
        comm.allReduceAsync(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    // Nobody waits: the progress thread must finish it on its own.
    auto until = Clock::now() + std::chrono::seconds(20);
    while (!request.test() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(request.test()) << "rank " << comm.rank() << ": not finished without a wait";
    EXPECT_EQ(buf[0], 2.0f);
    EXPECT_EQ(buf.back(), 2.0f);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

// A caller that keeps submitting and never waits still sees its ops run: the progress thread
// leaves the queue to a submitting caller only for a while (1 ms of one op at the front; the
// bound itself: progress_pace_test), then runs what is queued. Both ranks submit the same 20000
// ops, one per 25 us (0.5 s: with 2000 (50 ms) a loaded 2-core CI machine once gave the progress
// threads no core in time, 2026-11-27).
TEST(Async, OpsRunWhileTheCallerKeepsSubmitting) {
  constexpr int kRanks = 2;
  constexpr int kOps = 20000;
  Options options;
  options.timeoutSeconds = 30;
  auto errors = runRanks(kRanks, options, [&](Communicator& comm) {
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(16, 1.0f));
    std::vector<Request> requests;
    requests.reserve(kOps);
    int doneAt = -1;  // how many ops were submitted when the first was seen done
    for (int i = 0; i < kOps; ++i) {
      requests.push_back(comm.allReduceAsync(bufs[i].data(), bufs[i].data(), bufs[i].size(),
                                             DataType::kFloat32, RedOp::kSum));
      if (doneAt < 0 && requests.front().test()) doneAt = i + 1;
      const auto spinUntil = Clock::now() + std::chrono::microseconds(25);
      while (Clock::now() < spinUntil) {
      }
    }
    for (auto& r : requests) r.wait();
    EXPECT_GE(doneAt, 1) << "rank " << comm.rank() << ": the first op did not run while the "
                         << "caller kept submitting for " << kOps << " ops";
    for (int i = 0; i < kOps; ++i) {
      ASSERT_EQ(bufs[i][0], 2.0f) << "op " << i;
      ASSERT_EQ(bufs[i][15], 2.0f) << "op " << i;
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

// wait() with a deadline shorter than the op's timeout returns kTimeout at that deadline, even
// when the op has not started (the caller must not run it inline: that ends only with the op).
TEST(Async, WaitWithAShortDeadlineReturnsAtTheDeadline) {
  constexpr int kRanks = 2;
  Options options;
  options.timeoutSeconds = 20;
  auto errors = runRanks(kRanks, options, [&](Communicator& comm) {
    std::vector<float> buf(1000, 1.0f);
    if (comm.rank() == 0) {
      // Rank 1 joins only after a second: rank 0's short waits must each end on time.
      Request request =
          comm.allReduceAsync(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
      for (int i = 0; i < 3; ++i) {
        const auto start = Clock::now();
        try {
          request.wait(Deadline::after(0.1));
          ADD_FAILURE() << "wait " << i << " returned before the peer joined";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        }
        const double took = std::chrono::duration<double>(Clock::now() - start).count();
        EXPECT_LT(took, 0.6) << "wait " << i << " overran its 0.1 s deadline";
      }
      request.wait();  // the op itself goes on and completes once the peer joins
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    }
    EXPECT_EQ(buf[0], 2.0f);
    EXPECT_EQ(buf.back(), 2.0f);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

TEST(Async, AbortFromAnotherThreadEndsQueuedAndRunningOps) {
  constexpr int kRanks = 2;
  Options options;
  options.timeoutSeconds = 30;
  auto errors = runRanks(kRanks, options, [&](Communicator& comm) {
    std::vector<float> buf(1000, 1.0f);
    if (comm.rank() == 1) {
      // Rank 1 never joins; rank 0's ops wait until its own abort.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return;
    }
    std::vector<Request> requests;
    for (int k = 0; k < 5; ++k) {
      requests.push_back(
          comm.allReduceAsync(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum));
    }
    std::vector<Request*> pending;
    for (auto& request : requests) pending.push_back(&request);
    expectAbortEnds(comm, pending);
  });
  EXPECT_EQ(errorText(errors[0]), "");
}

}  // namespace
}  // namespace braid::testing
