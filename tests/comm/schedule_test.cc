// Proves every generated schedule for ranks 1..16, and shows the verifier catches broken ones.
#include "comm/schedule/schedule.h"

#include <gtest/gtest.h>

#include "comm/schedule/verifier.h"
#include "common/error.h"

namespace braid::comm {
namespace {

const Collective kShapes[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                         Collective::kBroadcast, Collective::kReduce};
const Algorithm kFamilies[] = {Algorithm::kRing, Algorithm::kOneShot, Algorithm::kChain};

TEST(Schedule, EveryGeneratedScheduleIsCorrectForRanks1To16) {
  int verified = 0;
  for (Algorithm family : kFamilies) {
    for (Collective shape : kShapes) {
      if (!familySupports(family, shape)) continue;
      for (int n = 1; n <= 16; ++n) {
        for (size_t count : {size_t{1}, size_t{2}, size_t(n), size_t(2 * n + 1), size_t{37}}) {
          for (int lanes : {1, 2, 3}) {
            if (family == Algorithm::kOneShot && lanes > 1) continue;
            for (bool inPlace : {false, true}) {
              for (int root : {0, n - 1, n / 2}) {
                for (size_t perPiece : {size_t{0}, size_t{1}, size_t{3}}) {
                  // Direct schedules send everything before receiving: they need K*piece >= count
                  // (the tuner only picks them below that); give them enough slots.
                  int slots = family == Algorithm::kOneShot ? int(count) + 1 : 2;
                  ScheduleSpec spec{shape, family, n, count, root, lanes, inPlace, perPiece, {}};
                  ASSERT_EQ(verifySchedule(spec, VerifyOptions{slots}), "");
                  ++verified;
                }
                if (shape != Collective::kBroadcast && shape != Collective::kReduce) break;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 2000);
}

// All-to-all (direct and the pairwise exchange, in and out of place), gather and scatter (the
// direct family's only), proved with one slot per channel (they stream: no per-peer size limit).
TEST(Schedule, ExchangeSchedulesAreCorrectForRanks1To16) {
  int verified = 0;
  for (Collective shape : {Collective::kAllToAll, Collective::kGather, Collective::kScatter}) {
    EXPECT_TRUE(familySupports(Algorithm::kOneShot, shape));
    EXPECT_EQ(familySupports(Algorithm::kPairwise, shape), shape == Collective::kAllToAll);
    for (Algorithm other : {Algorithm::kRing, Algorithm::kChain, Algorithm::kTree, Algorithm::kHier})
      EXPECT_FALSE(familySupports(other, shape)) << algorithmName(other);
    for (Algorithm family : {Algorithm::kOneShot, Algorithm::kPairwise}) {
    if (!familySupports(family, shape)) continue;
    for (int n = 1; n <= 16; ++n) {
      for (size_t count : {size_t{1}, size_t{2}, size_t(n), size_t(2 * n + 1), size_t{37}}) {
        for (bool inPlace : {false, true}) {
          for (int root : {0, n - 1, n / 2}) {
            for (size_t perPiece : {size_t{0}, size_t{1}, size_t{3}}) {
              for (int slots : {1, 2}) {
                ScheduleSpec spec{shape, family, n, count, root, 1, inPlace, perPiece, {}};
                ASSERT_EQ(verifySchedule(spec, VerifyOptions{slots}), "");
                ++verified;
              }
            }
            if (shape == Collective::kAllToAll) break;
          }
        }
      }
    }
    }
  }
  EXPECT_GT(verified, 2000);
}

// Sending every block to every peer before receiving (one lane) deadlocks once blocks outgrow
// the slots, and in place, receiving a block before it was sent loses it: the verifier sees both.
TEST(Verifier, CatchesAnAllToAllThatCannotStreamOrOverwritesItsInput) {
  ScheduleSpec spec{Collective::kAllToAll, Algorithm::kOneShot, 3, 8, 0, 1, false, 2, {}};
  std::vector<RankProgram> oneLane;
  for (int r = 0; r < 3; ++r) {
    RankProgram p = buildProgram(spec, r);
    ASSERT_GE(p.lanes.size(), 4u);  // direct: a lane per peer and direction
    Lane sendsFirst;
    for (bool sends : {true, false})
      for (const Lane& lane : p.lanes)
        for (const Step& s : lane.steps)
          if ((s.prim == Prim::kRecv) != sends) sendsFirst.steps.push_back(s);
    oneLane.push_back(RankProgram{{sendsFirst}});
  }
  EXPECT_NE(verifyPrograms(spec, oneLane).find("deadlock"), std::string::npos);
  ScheduleSpec inPlace = spec;
  inPlace.inPlace = true;
  for (Algorithm family : {Algorithm::kOneShot, Algorithm::kPairwise}) {
    ScheduleSpec outOfPlace = spec;
    outOfPlace.family = family;
    std::vector<RankProgram> outOfPlaceSteps;  // the streaming program run on one buffer
    for (int r = 0; r < 3; ++r) outOfPlaceSteps.push_back(buildProgram(outOfPlace, r));
    EXPECT_NE(verifyPrograms(inPlace, outOfPlaceSteps, VerifyOptions{1}), "")
        << algorithmName(family);
  }
}

TEST(Schedule, UnsupportedFamilyIsRejected) {
  ScheduleSpec spec{Collective::kAllReduce, Algorithm::kChain, 4, 10, 0, 1, false, 0, {}};
  EXPECT_THROW(buildProgram(spec, 0), Error);
  EXPECT_NE(verifySchedule(spec), "");
}

std::vector<RankProgram> programsFor(const ScheduleSpec& spec) {
  std::vector<RankProgram> programs;
  for (int r = 0; r < spec.nranks; ++r) programs.push_back(buildProgram(spec, r));
  return programs;
}

TEST(Verifier, CatchesADroppedStep) {
  ScheduleSpec spec{Collective::kAllReduce, Algorithm::kRing, 4, 40, 0, 1, false, 3, {}};
  auto programs = programsFor(spec);
  programs[2].lanes[0].steps.pop_back();  // rank 2 never receives its last chunk
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

TEST(Verifier, CatchesAWrongChunk) {
  ScheduleSpec spec{Collective::kAllReduce, Algorithm::kRing, 3, 30, 0, 1, false, 0, {}};
  auto programs = programsFor(spec);
  programs[1].lanes[0].steps[0].src.offset += 10;  // sends the wrong chunk (same size)
  std::string result = verifyPrograms(spec, programs);
  EXPECT_NE(result.find("expected"), std::string::npos) << result;
}

TEST(Verifier, CatchesADoubleReduction) {
  ScheduleSpec spec{Collective::kReduce, Algorithm::kChain, 3, 9, 0, 1, false, 0, {}};
  auto programs = programsFor(spec);
  // The middle rank forwards its input reduced twice.
  programs[1].lanes[0].steps[0].prim = Prim::kRecvReduceSend;
  auto& step = programs[1].lanes[0].steps[0];
  RankProgram twice = programs[1];
  twice.lanes[0].steps.insert(twice.lanes[0].steps.begin(), step);
  programs[1] = twice;
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

TEST(Verifier, CatchesADeadlock) {
  ScheduleSpec spec{Collective::kAllReduce, Algorithm::kRing, 2, 10, 0, 1, false, 5, {}};
  auto programs = programsFor(spec);
  // Both ranks receive before they send.
  for (auto& p : programs) std::swap(p.lanes[0].steps[0], p.lanes[0].steps[1]);
  std::string result = verifyPrograms(spec, programs);
  EXPECT_NE(result.find("deadlock"), std::string::npos) << result;
}

TEST(Verifier, CatchesAMissingFinalize) {
  ScheduleSpec spec{Collective::kReduceScatter, Algorithm::kRing, 3, 5, 0, 1, false, 0, {}};
  auto programs = programsFor(spec);
  programs[0].lanes[0].steps.back().finalize = false;
  EXPECT_NE(verifyPrograms(spec, programs), "");
}

}  // namespace
}  // namespace braid::comm
