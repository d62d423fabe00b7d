// When the progress thread may run the op at the queue's front (comm/detail/progress_pace.h): a
// grace for a fresh op, longer while the caller keeps submitting, never past the longest defer.
#include <gtest/gtest.h>

#include <chrono>

#include "comm/detail/progress_pace.h"

namespace braid::comm {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = ProgressPace::Clock;

const int kA = 0, kB = 0;  // two ops' addresses
const void* const opA = &kA;
const void* const opB = &kB;

TEST(ProgressPace, AFreshOpWaitsTheGrace) {
  ProgressPace pace(microseconds(100), milliseconds(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(pace.due(t0, opA, 1, 10), t0 + microseconds(100));
  // Looked at again with no submit since: due a grace after it was first seen.
  EXPECT_EQ(pace.due(t0 + microseconds(50), opA, 1, 10), t0 + microseconds(100));
  EXPECT_EQ(pace.due(t0 + microseconds(150), opA, 1, 10), t0 + microseconds(100));
}

TEST(ProgressPace, ASubmittingCallerKeepsTheQueueUpToTheLongestDefer) {
  ProgressPace pace(microseconds(100), milliseconds(1));
  const auto t0 = Clock::now();
  pace.due(t0, opA, 1, 10);
  uint64_t pushes = 10;
  auto t = t0;
  // The caller pushes between every look: each look defers by a grace ...
  for (int i = 0; i < 8; ++i) {
    t += microseconds(100);
    EXPECT_EQ(pace.due(t, opA, 1, ++pushes), t + microseconds(100)) << i;
  }
  // ... but never past 1 ms after the front was first seen.
  t = t0 + microseconds(950);
  EXPECT_EQ(pace.due(t, opA, 1, ++pushes), t0 + milliseconds(1));
  t = t0 + microseconds(1200);
  EXPECT_LE(pace.due(t, opA, 1, ++pushes), t);
}

TEST(ProgressPace, ANewFrontOrAReusedOpStartsAgain) {
  ProgressPace pace(microseconds(100), milliseconds(1));
  const auto t0 = Clock::now();
  pace.due(t0, opA, 1, 10);
  const auto t1 = t0 + milliseconds(5);
  EXPECT_EQ(pace.due(t1, opB, 2, 11), t1 + microseconds(100));  // another op
  const auto t2 = t1 + milliseconds(5);
  EXPECT_EQ(pace.due(t2, opB, 7, 12), t2 + microseconds(100));  // same op object, reused
}

TEST(ProgressPace, NoGraceRunsAtOnce) {
  ProgressPace pace(microseconds(0), milliseconds(1));  // the device: the thread runs every op
  const auto t0 = Clock::now();
  EXPECT_EQ(pace.due(t0, opA, 1, 10), t0);
  EXPECT_EQ(pace.due(t0, opA, 1, 11), t0);
}

}  // namespace
}  // namespace braid::comm
