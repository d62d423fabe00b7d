// --check-sync's cross-rank comparison, with two ranks as threads of this process.
#include "trainer/train/sync_check.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/kit/communicators.h"

namespace braid::trainer {
namespace {

// Runs checkParamsInSync on 2 thread-ranks whose parameters differ iff `differ`; returns each
// rank's error message ("" when it passed).
std::vector<std::string> checkTwoRanks(bool differ) {
  Options options;
  options.timeoutSeconds = 20;
  return testing::errorTexts(testing::runRanks(2, options, [&](Communicator& comm) {
    std::vector<float> params(1000, 0.25f);
    if (differ && comm.rank() == 1) params[123] = 0.5f;
    checkParamsInSync(comm, params.data(), params.size(), 17);
  }));
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
