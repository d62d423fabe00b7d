#include "trainer/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/trainer/data/idx_files.h"
#include "trainer/data/rng.h"

namespace braid::trainer {
namespace {

using testing::expectError;

SamplerOptions opts(int64_t n, int rank, int world, int64_t batch, uint64_t seed = 7) {
  SamplerOptions o;
  o.datasetSize = n;
  o.rank = rank;
  o.worldSize = world;
  o.globalBatch = batch;
  o.seed = seed;
  return o;
}

TEST(Rng, MatchesPublishedDefinitions) {
  // SplitMix64's first output from state 0 (a widely quoted reference value).
  uint64_t state = 0;
  EXPECT_EQ(splitMix64(state), 0xe220a8397b1dcdafULL);
  // xoshiro256** from state {1, 2, 3, 4}: rotl(2 * 5, 7) * 9 = 11520, then 0 (s[1] becomes 0).
  Xoshiro256 rng(Xoshiro256::State{1, 2, 3, 4});
  EXPECT_EQ(rng.next(), 11520u);
  EXPECT_EQ(rng.next(), 0u);
  for (uint64_t bound : {1ull, 2ull, 3ull, 10ull, 60000ull, (1ull << 63) + 5}) {
    for (int i = 0; i < 200; ++i) ASSERT_LT(rng.below(bound), bound);
  }
}

TEST(Sampler, PermutationIsDeterministicPerSeedAndEpoch) {
  DistributedSampler a(opts(1000, 0, 1, 10, 42));
  DistributedSampler b(opts(1000, 0, 1, 10, 42));
  DistributedSampler c(opts(1000, 0, 1, 10, 43));
  const auto p0 = a.permutation(0);
  EXPECT_EQ(p0, b.permutation(0));
  EXPECT_NE(p0, a.permutation(1));
  EXPECT_NE(p0, c.permutation(0));
  // seed + epoch: seed 42 epoch 1 is seed 43 epoch 0 (as PyTorch's seed + epoch).
  EXPECT_EQ(a.permutation(1), c.permutation(0));
  auto sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  int fixedPoints = 0;
  for (int64_t i = 0; i < 1000; ++i) fixedPoints += p0[i] == i;
  EXPECT_LT(fixedPoints, 10) << "shuffle barely moved anything";
}

TEST(Sampler, OrderIsPinned) {
  // Frozen output of this implementation: a change here breaks resuming old checkpoints and
  // comparing runs, so it must be deliberate.
  SamplerOptions o = opts(12, 0, 1, 1, 2026);
  DistributedSampler s(o);
  EXPECT_EQ(s.permutation(0), (std::vector<int64_t>{11, 1, 10, 6, 4, 7, 9, 2, 3, 8, 0, 5}));
  EXPECT_EQ(s.permutation(1), (std::vector<int64_t>{1, 9, 5, 4, 0, 10, 2, 11, 6, 7, 8, 3}));
}

TEST(Sampler, NoShuffleKeepsFileOrder) {
  SamplerOptions o = opts(10, 1, 2, 2);
  o.shuffle = false;
  DistributedSampler s(o);
  EXPECT_EQ(s.rankIndices(3), (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

TEST(Sampler, RanksAreDisjointCoveringAndEqualSized) {
  for (int64_t n : {11, 100, 103, 1000}) {
    for (int world : {1, 2, 3, 5, 8, 11}) {
      if (n < world) continue;
      SCOPED_TRACE(::testing::Message() << "n=" << n << " world=" << world);
      for (uint64_t epoch : {0u, 1u, 5u}) {
        std::vector<int> seen(n, 0);
        const auto perm = DistributedSampler(opts(n, 0, world, world)).permutation(epoch);
        for (int r = 0; r < world; ++r) {
          DistributedSampler s(opts(n, r, world, world));
          const auto mine = s.rankIndices(epoch);
          ASSERT_EQ(int64_t(mine.size()), n / world);
          for (int64_t i : mine) {
            ASSERT_GE(i, 0);
            ASSERT_LT(i, n);
            seen[i]++;
          }
        }
        // Exactly the first n - n % world permutation entries are used, once each.
        const int64_t used = n - n % world;
        for (int64_t p = 0; p < n; ++p) ASSERT_EQ(seen[perm[p]], p < used ? 1 : 0) << p;
      }
    }
  }
}

TEST(Sampler, GlobalBatchMatchesOneRankBatch) {
  // The union of R ranks' batch k is the 1-rank batch k for the same global batch.
  // 1020 is divisible by every rank count here and leaves a short last batch (12 of 24).
  const int64_t n = 1020, globalBatch = 24;
  for (int world : {1, 2, 3, 4, 6}) {
    SCOPED_TRACE(world);
    const auto single = DistributedSampler(opts(n, 0, 1, globalBatch)).batches(2, globalBatch);
    ASSERT_EQ(single.size(), 43u);
    EXPECT_EQ(single.back().size(), 12u);
    std::vector<std::vector<std::vector<int64_t>>> perRank;
    for (int r = 0; r < world; ++r) {
      perRank.push_back(DistributedSampler(opts(n, r, world, globalBatch)).batches(2, globalBatch));
    }
    for (size_t k = 0; k < single.size(); ++k) {
      std::multiset<int64_t> joined;
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(perRank[r].size(), single.size());
        ASSERT_EQ(perRank[r][k].size(), perRank[0][k].size());
        joined.insert(perRank[r][k].begin(), perRank[r][k].end());
      }
      EXPECT_EQ(joined, std::multiset<int64_t>(single[k].begin(), single[k].end())) << k;
    }
  }
}

TEST(Sampler, BatchSizesAndShortLastBatch) {
  // 103 samples on 2 ranks: 51 each, batches of 5 -> 10 full and one of 1.
  DistributedSampler s(opts(103, 1, 2, 10));
  EXPECT_EQ(s.samplesPerRank(), 51);
  EXPECT_EQ(s.perRankBatch(10), 5);
  EXPECT_EQ(s.batchesPerEpoch(10), 11);
  const auto batches = s.batches(0, 10);
  ASSERT_EQ(batches.size(), 11u);
  for (size_t k = 0; k < 10; ++k) EXPECT_EQ(batches[k].size(), 5u);
  EXPECT_EQ(batches[10].size(), 1u);
  std::vector<int64_t> flat;
  for (const auto& b : batches) flat.insert(flat.end(), b.begin(), b.end());
  EXPECT_EQ(flat, s.rankIndices(0));

  SamplerOptions o = opts(103, 1, 2, 10);
  o.dropLastBatch = true;
  DistributedSampler dropping(o);
  EXPECT_EQ(dropping.batchesPerEpoch(10), 10);
  const auto kept = dropping.batches(0, 10);
  ASSERT_EQ(kept.size(), 10u);
  for (size_t k = 0; k < 10; ++k) EXPECT_EQ(kept[k], batches[k]);
}

TEST(Sampler, ErrorsSayWhatIsWrong) {
  expectError([] { DistributedSampler(opts(100, 0, 4, 130)); }, ErrorCode::kInvalidUsage,
              {"global batch 130", "multiple of the 4 ranks"});
  DistributedSampler s(opts(100, 0, 4, 8));
  expectError([&] { s.batches(0, 6); }, ErrorCode::kInvalidUsage, {"global batch 6", "4 ranks"});
  expectError([] { DistributedSampler(opts(3, 0, 4, 4)); }, ErrorCode::kInvalidUsage,
              {"3 samples", "4"});
  expectError([] { DistributedSampler(opts(100, 4, 4, 4)); }, ErrorCode::kInvalidUsage,
              {"rank 4", "0..3"});
  SamplerOptions o = opts(100, 0, 4, 200);
  o.dropLastBatch = true;
  expectError([&] { DistributedSampler{o}; }, ErrorCode::kInvalidUsage,
              {"global batch 200", "only 25"});
  expectError(
      [&] {
        s.restore({0, 14});
      },
      ErrorCode::kInvalidUsage, {"epoch 0, batch 14", "13 batches"});
}

TEST(Sampler, CursorFollowsBatchesAcrossEpochs) {
  DistributedSampler s(opts(50, 2, 3, 9));
  std::vector<int64_t> out;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    s.setEpoch(epoch);
    const auto expected = s.batches(epoch, 9);
    for (size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(s.state(), (SamplerState{epoch, k}));
      ASSERT_TRUE(s.next(out));
      EXPECT_EQ(out, expected[k]) << "epoch " << epoch << " batch " << k;
    }
    EXPECT_FALSE(s.next(out));
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(s.state(), (SamplerState{epoch, expected.size()}));
  }
}

TEST(Sampler, RestoreResumesExactly) {
  const SamplerOptions o = opts(997, 1, 4, 32, 123);
  // An uninterrupted run over 3 epochs, recording every batch and the state before it.
  DistributedSampler full(o);
  std::vector<SamplerState> states;
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> out;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    full.setEpoch(epoch);
    while (true) {
      const SamplerState before = full.state();
      if (!full.next(out)) break;
      states.push_back(before);
      batches.push_back(out);
    }
  }
  // Resume from a few saved positions (including mid-epoch and an epoch's very end) in a fresh
  // sampler, as after a restart, and check the rest of the run is identical.
  for (size_t cut : {size_t{0}, size_t{5}, size_t{7}, size_t{8}, batches.size() - 1}) {
    SCOPED_TRACE(cut);
    DistributedSampler resumed(o);
    resumed.restore(states[cut]);
    size_t i = cut;
    for (uint64_t epoch = states[cut].epoch; epoch < 3; ++epoch) {
      if (epoch != states[cut].epoch) resumed.setEpoch(epoch);
      while (resumed.next(out)) {
        ASSERT_LT(i, batches.size());
        ASSERT_EQ(out, batches[i]) << "batch " << i;
        ++i;
      }
    }
    EXPECT_EQ(i, batches.size());
  }
  // The end-of-epoch position restores too: next() then reports the epoch's end.
  DistributedSampler atEnd(o);
  atEnd.restore({1, uint64_t(atEnd.batchesPerEpoch(32))});
  EXPECT_FALSE(atEnd.next(out));
}

}  // namespace
}  // namespace braid::trainer
