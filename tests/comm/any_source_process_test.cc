// Receives from any source with ranks as processes: three senders to a receiver that uses the C
// API (braidRecvAnySource) over shm and tcp, every element and each sender's order checked; and
// a receive whose every peer has exited ends at once naming them, not at the timeout.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/braid.h"
#include "braid/braid.hpp"
#include "comm/bootstrap/address.h"
#include "tests/kit/processes.h"

namespace braid::testing {
namespace {

int32_t payload(int from, int k, size_t i) {
  return static_cast<int32_t>((from * 31337 + k * 7919) ^ static_cast<int32_t>(i * 2246822519u));
}

// Message k of rank `from`: sizes differ per sender and message, some span several pieces.
size_t lengthOf(int from, int k) { return size_t(1000) + size_t(from) * 40000 + size_t(k) * 7; }

constexpr int kRanks = 4, kPerSender = 5, kTag = 21;

int sender(int rank, ChildIo& io) {
  Communicator comm = Communicator::fromEnvironment();
  for (int k = 0; k < kPerSender; ++k) {
    std::vector<int32_t> out(lengthOf(rank, k));
    for (size_t i = 0; i < out.size(); ++i) out[i] = payload(rank, k, i);
    comm.send(out.data(), out.size(), DataType::kInt32, 0, kTag);
  }
  comm.barrier();
  io.say("sent", std::to_string(kPerSender));
  return kChildOk;
}

// Rank 0 through the C API: every message, in each sender's order, every element.
int receiver(ChildIo& io) {
  braidComm_t comm = nullptr;
  if (braidCommInitFromEnv(&comm) != braidSuccess) {
    io.say("fail", fmt::format("init: {}", braidGetLastError()));
    return kChildCheckFailed;
  }
  const size_t capacity = lengthOf(kRanks - 1, kPerSender - 1);
  std::vector<int32_t> buf(capacity);
  std::vector<int> next(kRanks, 0);
  int code = kChildOk;
  for (int m = 0; m < (kRanks - 1) * kPerSender && code == kChildOk; ++m) {
    int source = -1;
    size_t bytes = 0;
    const braidResult_t got = braidRecvAnySource(buf.data(), capacity, braidInt32, kTag, &source,
                                                 &bytes, comm);
    if (got != braidSuccess) {
      io.say("fail", fmt::format("receive {}: {}", m, braidGetLastError()));
      code = kChildCheckFailed;
      break;
    }
    if (source < 1 || source >= kRanks || next[source] >= kPerSender) {
      io.say("fail", fmt::format("receive {}: source {}", m, source));
      code = kChildCheckFailed;
      break;
    }
    const int k = next[source]++;
    if (bytes != lengthOf(source, k) * sizeof(int32_t)) {
      io.say("fail", fmt::format("message {} of rank {}: {} bytes, want {}", k, source, bytes,
                                 lengthOf(source, k) * sizeof(int32_t)));
      code = kChildWrongData;
      break;
    }
    for (size_t i = 0; i < lengthOf(source, k); ++i) {
      if (buf[i] != payload(source, k, i)) {
        io.say("fail", fmt::format("message {} of rank {}: element {} is {}, want {}", k, source,
                                   i, buf[i], payload(source, k, i)));
        code = kChildWrongData;
        break;
      }
    }
  }
  if (code == kChildOk && braidBarrier(comm) != braidSuccess) {
    io.say("fail", fmt::format("barrier: {}", braidGetLastError()));
    code = kChildCheckFailed;
  }
  braidCommDestroy(comm);
  io.say("received", std::to_string(next[1] + next[2] + next[3]));
  return code;
}

class AnySourceProcesses : public ::testing::TestWithParam<std::string> {};

TEST_P(AnySourceProcesses, ThreeSendersToACApiReceiver) {
  Job job(kRanks, bootstrap::findFreePort(),
          {{"BRAID_TIMEOUT", "30"}, {"BRAID_TRANSPORT", GetParam()}});
  job.startAll([](int rank, ChildIo& io) { return rank == 0 ? receiver(io) : sender(rank, io); });
  const std::vector<ChildResult> results = job.finish(120);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
  EXPECT_EQ(results[0].get("received"), std::to_string((kRanks - 1) * kPerSender));
}

INSTANTIATE_TEST_SUITE_P(AnySource, AnySourceProcesses, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(AnySourceProcessesGone, AReceiveWhoseEveryPeerExitedEndsAtOnce) {
  // The peers exit right after creation; rank 0's receive (timeout 30 s) must end within seconds
  // with kRemoteError saying a peer is gone.
  Job job(3, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "30"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    if (rank != 0) return kChildOk;
    std::vector<double> buf(64);
    const double start = monoNow();
    try {
      comm.recvAnySource(buf.data(), buf.size(), DataType::kFloat64, 4);
      io.say("fail", "a receive from peers that all exited finished");
      return kChildCheckFailed;
    } catch (const Error& e) {
      io.say("code", errorCodeName(e.code()));
      io.say("what", e.what());
    }
    io.say("seconds", std::to_string(monoNow() - start));
    return kChildOk;
  });
  const std::vector<ChildResult> results = job.finish(60);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
  const ChildResult& r0 = results[0];
  EXPECT_EQ(r0.get("code"), errorCodeName(ErrorCode::kRemoteError)) << r0.describe();
  const std::string what = r0.get("what");
  for (const char* part : {"rank 0", "recv from any source", "tag 4", "is gone"}) {
    EXPECT_NE(what.find(part), std::string::npos) << "no \"" << part << "\" in: " << what;
  }
  EXPECT_LT(r0.getDouble("seconds"), 10.0) << r0.describe();
}

}  // namespace
}  // namespace braid::testing
