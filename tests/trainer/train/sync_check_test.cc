// --check-sync's cross-rank comparison, with two ranks as threads of this process.
#include "trainer/train/sync_check.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/store.hpp"
#include "common/error.h"

namespace braid::trainer {
namespace {

// Runs checkParamsInSync on 2 thread-ranks whose parameters differ iff `differ`; returns each
// rank's error message ("" when it passed).
std::vector<std::string> checkTwoRanks(bool differ) {
  auto store = makeInMemoryStore();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Options options;
        options.timeoutSeconds = 20;
        options.storePrefix = "sync_check_test";
        Communicator comm = Communicator::fromStore(store, r, 2, options);
        std::vector<float> params(1000, 0.25f);
        if (differ && r == 1) params[123] = 0.5f;
        checkParamsInSync(comm, params.data(), params.size(), 17);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(SyncCheck, EqualParametersPass) {
  const auto errors = checkTwoRanks(false);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(SyncCheck, DifferentParametersFailOnEveryRankNamingTheStep) {
  const auto errors = checkTwoRanks(true);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("parameters differ across ranks after step 17"), std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

}  // namespace
}  // namespace braid::trainer
