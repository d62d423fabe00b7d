// Communicator::fromStore, the public way to create communicators over a store the caller gives:
// ranks as threads with an explicit Options::secret, a rank whose secret differs (every rank
// fails at once, naming the secret, instead of hanging), several communicators over one store,
// and braid's TCP store through its public factories.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "tests/kit/communicators.h"

namespace braid::testing {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 10007;  // odd: pieces of unequal size

// Rank r's element i; their sum over the ranks is known in closed form.
int64_t valueOf(int rank, size_t i) { return static_cast<int64_t>(i) * (rank + 1) - rank; }

int64_t sumOf(int ranks, size_t i) {
  int64_t sum = 0;
  for (int r = 0; r < ranks; ++r) sum += valueOf(r, i);
  return sum;
}

// An all-reduce (sum of int64) checked element by element.
void allReduceAndCheck(Communicator& comm) {
  std::vector<int64_t> send(kCount), recv(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) send[i] = valueOf(comm.rank(), i);
  comm.allReduce(send.data(), recv.data(), kCount, DataType::kInt64, RedOp::kSum);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(recv[i], sumOf(comm.size(), i)) << "rank " << comm.rank() << " element " << i;
  }
}

Options withSecret(const std::string& secret) {
  Options options;
  options.timeoutSeconds = 20;
  options.secret = secret;
  return options;
}

TEST(FromStore, AllReduceWithAnExplicitSecret) {
  auto errors = runRanksEach(
      kRanks, [](int) { return withSecret("from-store-test-secret"); }, allReduceAndCheck);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

TEST(FromStore, AWrongSecretOnOneRankFailsEveryRankNamingTheSecret) {
  constexpr double kTimeout = 5;
  const auto start = std::chrono::steady_clock::now();
  auto errors = runRanksEach(
      kRanks,
      [&](int rank) {
        Options options = withSecret(rank == 1 ? "not-the-secret" : "from-store-test-secret");
        options.timeoutSeconds = kTimeout;
        return options;
      },
      allReduceAndCheck);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, kTimeout) << "the ranks waited for the timeout instead of failing at once";
  for (int r = 0; r < kRanks; ++r) {
    const std::string text = errorText(errors[r]);
    EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage) << "rank " << r << ": " << text;
    EXPECT_NE(text.find("different job secret"), std::string::npos) << text;
    EXPECT_NE(text.find("rank " + std::to_string(r) + ":"), std::string::npos) << text;
    // The good ranks name rank 1; rank 1 names a good one.
    const std::string peer = r == 1 ? "peer rank 0 " : "peer rank 1 ";
    EXPECT_NE(text.find(peer), std::string::npos) << text;
  }
}

TEST(FromStore, TwoCommunicatorsOverOneStoreAtOnce) {
  auto store = makeInMemoryStore();
  // Threads 0..2 are the ranks of one communicator, threads 3..5 of another, all at once over
  // the same store.
  auto errors = runThreads(2 * kRanks, [&](int t) {
    Options options = withSecret("from-store-test-secret");
    options.storePrefix = t < kRanks ? "first" : "second";
    Communicator comm = Communicator::fromStore(store, t % kRanks, kRanks, options);
    allReduceAndCheck(comm);
  });
  for (int t = 0; t < 2 * kRanks; ++t) EXPECT_EQ(errorText(errors[t]), "") << "thread " << t;
}

TEST(FromStore, OverBraidsTcpStore) {
  TcpStoreServer::Options so;
  so.bindAddress = "127.0.0.1";
  so.worldSize = kRanks;
  so.secret = "from-store-test-secret";
  TcpStoreServer server(so);
  auto errors = runRanksOn(
      kRanks,
      [&](int rank) {
        TcpStoreOptions co;
        co.host = "127.0.0.1";
        co.port = server.port();
        co.worldSize = kRanks;
        co.secret = so.secret;
        co.rank = rank;
        co.timeoutSeconds = 20;
        return connectTcpStore(co);  // one connection per rank thread
      },
      [&](int) { return withSecret(so.secret); }, allReduceAndCheck);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

TEST(FromStore, RefusesNoStore) {
  try {
    Communicator::fromStore(nullptr, 0, 1);
    FAIL() << "fromStore accepted a null store";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("no store"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::testing
