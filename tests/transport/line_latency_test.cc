// LineLatency (transport/line_latency.h): the least of the last samples, unknown until enough.
#include "transport/line_latency.h"

#include <gtest/gtest.h>

namespace braid::transport {
namespace {

TEST(LineLatency, UnknownUntilAWindowOfSamples) {
  LineLatency l;
  for (int i = 0; i + 1 < LineLatency::kWindow; ++i) {
    l.add(40);
    EXPECT_EQ(l.nanos(), 0u);
    EXPECT_FALSE(l.full());
  }
  l.add(40);
  EXPECT_TRUE(l.full());
  EXPECT_EQ(l.nanos(), 40u);
}

TEST(LineLatency, TheLeastOfTheLastWindowWins) {
  LineLatency l;
  for (int i = 0; i < LineLatency::kWindow; ++i) l.add(i == 3 ? 150 : 900);  // one clean sample
  EXPECT_EQ(l.nanos(), 150u);
  for (int i = 0; i < LineLatency::kWindow; ++i) l.add(40);  // the cores moved closer
  EXPECT_EQ(l.nanos(), 40u);
  for (int i = 0; i < LineLatency::kWindow - 1; ++i) l.add(300);
  EXPECT_EQ(l.nanos(), 40u);  // the last 40 is still in the window
  l.add(300);
  EXPECT_EQ(l.nanos(), 300u);  // ... and now gone: they moved apart
  l.add(uint64_t{1} << 40);    // clamped, not wrapped
  EXPECT_EQ(l.nanos(), 300u);
}

}  // namespace
}  // namespace braid::transport
