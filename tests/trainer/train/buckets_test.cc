// Gradient buckets: coverage and order, and the parameter hash of --check-sync.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "trainer/train/grad_sync.h"
#include "trainer/train/sync_check.h"

namespace braid::trainer {
namespace {

TEST(Buckets, CoverTheBufferFromTheEndWithoutGaps) {
  for (size_t n : {1u, 7u, 100u, 235146u}) {
    for (size_t b : {1u, 3u, 64u, 1000000u}) {
      const auto buckets = makeBuckets(n, b);
      ASSERT_FALSE(buckets.empty());
      EXPECT_EQ(buckets.front().end, n);
      EXPECT_EQ(buckets.back().begin, 0u);
      for (size_t i = 0; i < buckets.size(); ++i) {
        EXPECT_LT(buckets[i].begin, buckets[i].end);
        EXPECT_LE(buckets[i].end - buckets[i].begin, b);
        if (i > 0) {
          EXPECT_EQ(buckets[i].end, buckets[i - 1].begin);
        }
      }
      EXPECT_EQ(buckets.size(), (n + b - 1) / b);
    }
  }
}

// The MLP's layout: fc1.weight 200704, fc1.bias 256, fc2.weight 32768, fc2.bias 128,
// fc3.weight 1280, fc3.bias 10.
TEST(Buckets, KeepWholeParametersAndCutOnlyOversizedOnes) {
  const std::vector<size_t> offsets = {0, 200704, 200960, 233728, 233856, 235136};
  const size_t n = 235146;
  const auto b = makeBuckets(offsets, n, 65536);
  // fc3 + fc2 + fc1.bias (34442) fit one bucket; fc1.weight is cut into 65536-pieces.
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].begin, 200704u);
  EXPECT_EQ(b[0].end, n);
  EXPECT_EQ(b[1].begin, 200704u - 65536);
  EXPECT_EQ(b[1].end, 200704u);
  EXPECT_EQ(b[4].begin, 0u);
  EXPECT_EQ(b[4].end, 200704u - 3 * 65536);
  // A cap smaller than the small parameters: one bucket per parameter (or piece).
  const auto c = makeBuckets(offsets, n, 200);
  EXPECT_EQ(c[0].begin, 235136u);
  EXPECT_EQ(c[0].end, n);
  size_t total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_LE(c[i].end - c[i].begin, 200u);
    if (i > 0) {
      EXPECT_EQ(c[i].end, c[i - 1].begin);
    }
    total += c[i].end - c[i].begin;
  }
  EXPECT_EQ(total, n);
  // A huge cap: one bucket.
  const auto d = makeBuckets(offsets, n, 25u << 18);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].begin, 0u);
  EXPECT_EQ(d[0].end, n);
  EXPECT_THROW(makeBuckets(std::vector<size_t>{5}, n, 100), Error);
}

TEST(Buckets, ZeroSizeIsRefused) { EXPECT_THROW(makeBuckets(10, 0), Error); }

TEST(SyncCheck, HashSeesEveryBit) {
  std::vector<float> a(1000, 0.5f), b = a;
  EXPECT_EQ(hashFloats(a.data(), a.size()), hashFloats(b.data(), b.size()));
  b[999] = std::nextafter(b[999], 1.0f);
  EXPECT_NE(hashFloats(a.data(), a.size()), hashFloats(b.data(), b.size()));
}

}  // namespace
}  // namespace braid::trainer
