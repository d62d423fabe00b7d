// Bad arguments and bad environments end in kInvalidUsage with a clear message and nothing
// touched; the store shrugs off garbage connections and refuses a wrong secret.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/address.h"
#include "tests/faults/checks.h"
#include "tests/kit/processes.h"
#include "tests/kit/reference.h"

namespace braid::faults {
namespace {

// A correct float all-reduce, checked; "" or what was wrong.
std::string goodAllReduce(Communicator& comm) {
  return testing::runCase(
      comm, {Collective::kAllReduce, DataType::kFloat32, RedOp::kSum, 1031, false, -1});
}

// ---- 7. Bad arguments --------------------------------------------------------------------------

TEST(BadArguments, EachFailsWithInvalidUsageTouchingNothing) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "20"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    const int n = comm.size();
    const size_t count = 256;
    std::vector<float> in(2 * count), out(2 * count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 97) + 0.5f;
    for (size_t i = 0; i < out.size(); ++i) out[i] = -float(i % 89);
    const std::vector<float> inBefore = in, outBefore = out;
    bool ok = true;
    auto bad = [&](const std::string& label, auto&& call) {
      bool good =
          expectError(io, label, call, ErrorCode::kInvalidUsage, {fmt::format("rank {}", rank)}, 2);
      if (in != inBefore || out != outBefore) {
        io.say(label + ".fail", "buffers were modified");
        good = false;
        in = inBefore;
        out = outBefore;
      }
      // After an invalid-usage error the communicator still works.
      std::string wrong = goodAllReduce(comm);
      if (!wrong.empty()) {
        io.say(label + ".after", wrong);
        good = false;
      }
      ok = ok && good;
    };
    const auto f32 = DataType::kFloat32;
    const auto sum = RedOp::kSum;
    bad("null_send", [&] { comm.allReduce(nullptr, out.data(), count, f32, sum); });
    bad("null_recv", [&] { comm.allReduce(in.data(), nullptr, count, f32, sum); });
    bad("null_bcast", [&] { comm.broadcast(nullptr, nullptr, count, f32, 0); });
    bad("dtype42",
        [&] { comm.allReduce(in.data(), out.data(), count, static_cast<DataType>(42), sum); });
    bad("op42", [&] { comm.allReduce(in.data(), out.data(), count, f32, static_cast<RedOp>(42)); });
    bad("root_n", [&] { comm.broadcast(in.data(), out.data(), count, f32, n); });
    bad("root_neg", [&] { comm.broadcast(in.data(), out.data(), count, f32, -1); });
    bad("reduce_root_99", [&] { comm.reduce(in.data(), out.data(), count, f32, sum, 99); });
    bad("send_self", [&] { comm.send(in.data(), count, f32, rank); });
    bad("recv_self", [&] { comm.recv(out.data(), count, f32, rank); });
    bad("send_peer_n", [&] { comm.send(in.data(), count, f32, n); });
    bad("count_overflow", [&] { comm.allReduce(in.data(), out.data(), SIZE_MAX / 2, f32, sum); });
    bad("gather_overflow", [&] { comm.allGather(in.data(), out.data(), SIZE_MAX / 4, f32); });
    bad("overlap", [&] { comm.allReduce(in.data(), in.data() + 1, count, f32, sum); });
    bad("overlap_gather", [&] { comm.allGather(out.data() + 1, out.data(), 8, f32); });
    bad("async_null", [&] {
      Request req = comm.allReduceAsync(nullptr, out.data(), count, f32, sum);
      req.wait(Deadline::after(5));
    });
    return ok ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(40);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

TEST(BadArguments, ChainAlgorithmForAllReduceIsInvalidUsage) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "20"}, {"BRAID_ALGO", "chain"}});
  job.startAll([](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<float> in(100, 1.0f), out(100, 7.0f);
    bool ok = expectError(
        io, "chain",
        [&] { comm.allReduce(in.data(), out.data(), 100, DataType::kFloat32, RedOp::kSum); },
        ErrorCode::kInvalidUsage, {"chain"}, 2);
    for (float v : out) ok = ok && v == 7.0f;
    // A rooted collective runs with chain; the communicator still works.
    std::string wrong = testing::runCase(
        comm, {Collective::kBroadcast, DataType::kInt32, RedOp::kSum, 1031, false, 1});
    if (!wrong.empty()) io.say("after", wrong);
    (void)rank;
    return ok && wrong.empty() ? kChildOk : kChildCheckFailed;
  });
  auto results = job.finish(30);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

struct EnvCase {
  std::string name;
  Env env;
  std::string needle;
};

class BadEnvironment : public ::testing::TestWithParam<EnvCase> {};

// Rank 1 of 2 (so no store server starts): fromEnvironment must refuse at once, naming the
// variable.
TEST_P(BadEnvironment, FromEnvironmentFailsWithInvalidUsage) {
  const EnvCase c = GetParam();
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "3"}});
  job.start(
      1,
      [&](int, ChildIo& io) {
        bool ok = expectError(
            io, "init", [] { Communicator::fromEnvironment(); }, ErrorCode::kInvalidUsage,
            {c.needle}, 2);
        return ok ? kChildOk : kChildCheckFailed;
      },
      c.env);
  auto results = job.finish(10);
  EXPECT_EQ(results[1].exitCode, kChildOk) << results[1].describe();
}

INSTANTIATE_TEST_SUITE_P(
    Procs, BadEnvironment,
    ::testing::Values(
        EnvCase{"algo_bogus", {{"BRAID_ALGO", "bogus"}}, "bogus"},
        EnvCase{"transport_unknown", {{"BRAID_TRANSPORT", "carrier-pigeon"}}, "carrier-pigeon"},
        EnvCase{"timeout_malformed", {{"BRAID_TIMEOUT", "soon"}}, "BRAID_TIMEOUT"},
        EnvCase{"timeout_negative", {{"BRAID_TIMEOUT", "-1"}}, "BRAID_TIMEOUT"},
        EnvCase{"rank_missing", {{"RANK", ""}}, "RANK"},
        EnvCase{"rank_too_big", {{"RANK", "2"}}, "RANK"},
        EnvCase{"rank_malformed", {{"RANK", "one"}}, "RANK"},
        EnvCase{"world_size_missing", {{"WORLD_SIZE", ""}}, "WORLD_SIZE"},
        EnvCase{"port_malformed", {{"MASTER_PORT", "http"}}, "MASTER_PORT"}),
    [](const ::testing::TestParamInfo<EnvCase>& info) { return info.param.name; });

// ---- 8. Bootstrap attacks ----------------------------------------------------------------------

// Connects to 127.0.0.1:port, retrying for up to `seconds`; -1 if it never succeeds.
int connectTo(int port, double seconds) {
  const double end = monoNow() + seconds;
  while (monoNow() < end) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    ::close(fd);
    ::usleep(20000);
  }
  return -1;
}

void sendRandom(int fd, size_t bytes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<unsigned char> data(bytes);
  for (auto& b : data) b = static_cast<unsigned char>(gen());
  (void)!::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
}

TEST(BootstrapAttack, GarbageConnectionsDoNotStopTheJob) {
  const int port = bootstrap::findFreePort();
  Job job(2, port, {{"BRAID_TIMEOUT", "15"}});
  auto body = [](int, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::string wrong = goodAllReduce(comm);
    if (!wrong.empty()) io.say("wrong", wrong);
    return wrong.empty() ? kChildOk : kChildWrongData;
  };
  job.start(0, body);  // hosts the store
  std::vector<int> fds;
  int garbage = connectTo(port, 10);
  ASSERT_GE(garbage, 0) << "rank 0's store never listened on port " << port;
  sendRandom(garbage, 4096, 1);
  ::close(garbage);
  // Looks like a handshake with a wrong secret: a length-ish prefix, then random bytes.
  int wrongSecret = connectTo(port, 5);
  ASSERT_GE(wrongSecret, 0);
  const unsigned char prefix[8] = {16, 0, 0, 0, 0, 0, 0, 0};
  (void)!::send(wrongSecret, prefix, sizeof prefix, MSG_NOSIGNAL);
  sendRandom(wrongSecret, 16, 2);
  fds.push_back(wrongSecret);
  // A huge claimed length that never arrives, and a connection that says nothing at all.
  int huge = connectTo(port, 5);
  const unsigned char big[8] = {0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f};
  (void)!::send(huge, big, sizeof big, MSG_NOSIGNAL);
  fds.push_back(huge);
  fds.push_back(connectTo(port, 5));
  job.start(1, body);
  auto results = job.finish(30);
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
}

TEST(BootstrapAttack, WrongSecretRankFailsNamingTheStore) {
  Job job(2, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "3"}});
  auto body = [](int rank, ChildIo& io) {
    if (rank == 0) {
      // Its partner never gets in: it must fail (any error), not hang.
      try {
        Communicator comm = Communicator::fromEnvironment();
        io.say("rank0", "joined a job whose other rank had the wrong secret");
        return kChildCheckFailed;
      } catch (const Error& e) {
        io.say("rank0.msg", e.what());
        return kChildOk;
      }
    }
    ::usleep(200000);  // let rank 0 listen first
    bool ok = expectError(
        io, "init", [] { Communicator::fromEnvironment(); }, ErrorCode::kRemoteError,
        {"store", "secret"}, 5);
    return ok ? kChildOk : kChildCheckFailed;
  };
  job.start(0, body);
  job.start(1, body, {{"BRAID_SECRET", "not-the-secret"}});
  auto results = job.finish(20);
  EXPECT_EQ(results[1].exitCode, kChildOk) << results[1].describe();
  EXPECT_EQ(results[0].exitCode, kChildOk) << results[0].describe();
}

}  // namespace
}  // namespace braid::faults
