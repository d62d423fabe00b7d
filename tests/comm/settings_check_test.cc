// At init every rank publishes the settings that must agree (comm/create/rendezvous.cc): a rank
// that differs fails init on every rank, with a message naming the setting, the values and the
// ranks; the timeout may differ (each rank bounds its own waits).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/kit/communicators.h"

namespace braid {
namespace {

std::string errorOf(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return std::string(errorCodeName(err.code())) + ": " + err.what();
  } catch (const std::exception& err) {
    return err.what();
  }
}

TEST(SettingsCheck, ARankWithAnotherChunkSizeFailsInitOnEveryRank) {
  auto errors = testing::runRanksEach(
      3,
      [](int r) {
        Options o;
        o.timeoutSeconds = 10;
        o.chunkBytes = r == 2 ? 65536 : 32768;
        return o;
      },
      [](Communicator&) { ADD_FAILURE() << "created"; });
  for (int r = 0; r < 3; ++r) {
    const std::string e = errorOf(errors[r]);
    EXPECT_NE(e.find("invalid usage"), std::string::npos) << e;
    EXPECT_NE(e.find("init: the ranks disagree"), std::string::npos) << e;
    EXPECT_NE(e.find("slot bytes (BRAID_CHUNK): 32768 on ranks 0, 1, 65536 on rank 2"),
              std::string::npos)
        << e;
    // Where each rank's braid came from (here: this test binary, the same on every rank).
    EXPECT_NE(e.find("(libbraid: /"), std::string::npos) << e;
    EXPECT_NE(e.find(" on ranks 0, 1, 2)"), std::string::npos) << e;
  }
}

TEST(SettingsCheck, EveryDifferenceIsNamed) {
  auto errors = testing::runRanksEach(
      2,
      [](int r) {
        Options o;
        o.timeoutSeconds = 10;
        if (r == 1) {
          o.channels = 2;
          o.algorithm = Algorithm::kRing;
        }
        return o;
      },
      [](Communicator&) { ADD_FAILURE() << "created"; });
  for (int r = 0; r < 2; ++r) {
    const std::string e = errorOf(errors[r]);
    EXPECT_NE(e.find("algorithm (BRAID_ALGO): auto on rank 0, ring on rank 1"), std::string::npos)
        << e;
    EXPECT_NE(e.find("channels (BRAID_CHANNELS): 2 on rank 1, default on rank 0"),
              std::string::npos)
        << e;
  }
}

TEST(InitDeadline, EveryAbsentRankIsNamed) {
  // A world of 4 where ranks 2 and 3 never start: ranks 0 and 1 fail within the timeout, naming
  // both.
  auto store = makeInMemoryStore();
  std::string errors[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      Options o;
      o.timeoutSeconds = 1;
      try {
        Communicator::fromStore(store, r, 4, o);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("peer ranks 2, 3 did not publish their"), std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find("rank " + std::to_string(r) + ": init"), std::string::npos)
        << errors[r];
  }
}

TEST(SettingsCheck, TimeoutsMayDiffer) {
  auto errors = testing::runRanksEach(
      2,
      [](int r) {
        Options o;
        o.timeoutSeconds = r == 0 ? 10 : 20;
        return o;
      },
      [](Communicator& c) { c.barrier(); });
  EXPECT_EQ(errorOf(errors[0]), "");
  EXPECT_EQ(errorOf(errors[1]), "");
}

}  // namespace
}  // namespace braid
