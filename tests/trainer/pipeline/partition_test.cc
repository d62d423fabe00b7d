// Splitting layers into stages: the exact min-max contiguous split, its errors, and the
// parameter ranges and boundary shapes of the bundled models.
#include "trainer/pipeline/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "common/error.h"
#include "trainer/nn/models.h"
#include "trainer/pipeline/stage_layout.h"

namespace braid::trainer {
namespace {

/// The largest and the smallest stage cost of a split.
std::pair<double, double> stageExtremes(const std::vector<double>& costs,
                                        const StageBounds& bounds) {
  double largest = 0, smallest = 1e300;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    double sum = 0;
    for (size_t i = bounds[s]; i < bounds[s + 1]; ++i) sum += costs[i];
    largest = std::max(largest, sum);
    smallest = std::min(smallest, sum);
  }
  return {largest, smallest};
}

/// Over every split, by trying them all: the smallest largest stage, and with it the largest
/// smallest stage.
std::pair<double, double> bruteForce(const std::vector<double>& costs, int stages) {
  std::pair<double, double> best{1e300, -1};
  StageBounds bounds(static_cast<size_t>(stages) + 1, 0);
  bounds.back() = costs.size();
  std::function<void(size_t, size_t)> place = [&](size_t s, size_t from) {
    if (s == static_cast<size_t>(stages)) {
      const auto e = stageExtremes(costs, bounds);
      if (e.first < best.first || (e.first == best.first && e.second > best.second)) best = e;
      return;
    }
    for (size_t b = from + 1; b + (static_cast<size_t>(stages) - s) <= costs.size(); ++b) {
      bounds[s] = b;
      place(s + 1, b);
    }
  };
  place(1, 0);
  return best;
}

TEST(PipelinePartition, SmallestLargestThenLargestSmallestStage) {
  EXPECT_EQ(partitionLayers({1, 1, 1, 1}, 2), (StageBounds{0, 2, 4}));
  EXPECT_EQ(partitionLayers({10, 1, 1, 1, 1, 1}, 2), (StageBounds{0, 1, 6}));
  EXPECT_EQ(partitionLayers({1, 2, 3, 4, 5}, 1), (StageBounds{0, 5}));
  EXPECT_EQ(partitionLayers({0, 5, 0, 5, 0}, 5), (StageBounds{0, 1, 2, 3, 4, 5}));
  // Random costs (zeros included, as parameter-free layers have): the smallest largest stage and
  // then the largest smallest stage of all splits, every stage non-empty.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 8;
    std::vector<double> costs(n);
    for (double& c : costs) c = static_cast<double>(rng() % 4 == 0 ? 0 : rng() % 100);
    const int stages = 1 + static_cast<int>(rng() % n);
    const StageBounds bounds = partitionLayers(costs, stages);
    ASSERT_EQ(bounds.size(), static_cast<size_t>(stages) + 1);
    EXPECT_EQ(bounds.front(), 0u);
    EXPECT_EQ(bounds.back(), n);
    for (size_t s = 0; s + 1 < bounds.size(); ++s) EXPECT_LT(bounds[s], bounds[s + 1]);
    EXPECT_EQ(stageExtremes(costs, bounds), bruteForce(costs, stages)) << formatBounds(bounds);
  }
}

TEST(PipelinePartition, MoreStagesThanLayersIsNamed) {
  try {
    partitionLayers({1, 2, 3}, 4);
    FAIL() << "4 stages of 3 layers accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("--stages 4: the model has 3 top-level layers"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(partitionLayers({1, 2, 3}, 0), Error);
}

// The MLP: Flatten, fc1, ReLU, fc2, ReLU, fc3; by parameter count fc1 (200,960) is a stage of
// its own.
TEST(PipelinePartition, MlpRangesAndSplit) {
  auto model = makeMlp(1);
  const auto ranges = layerParamRanges(model->net, model->store.numParams());
  ASSERT_EQ(ranges.size(), 6u);
  const std::vector<size_t> sizes = {0, 200960, 0, 32896, 0, 1290};
  size_t at = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].begin, at) << i;
    EXPECT_EQ(ranges[i].size(), sizes[i]) << i;
    at = ranges[i].end;
  }
  EXPECT_EQ(at, model->store.numParams());
  const StageBounds bounds = partitionLayers(paramCosts(ranges), 2);
  EXPECT_EQ(bounds, (StageBounds{0, 2, 6}));
  // 3 stages: fc1 still alone at the top, but no parameter-free layer becomes a stage of its own.
  EXPECT_EQ(partitionLayers(paramCosts(ranges), 3), (StageBounds{0, 2, 4, 6}));
  const ParamRange second = stageParamRange(ranges, 2, 6);
  EXPECT_EQ(second.begin, 200960u);
  EXPECT_EQ(second.end, model->store.numParams());
}

// The ResNet's top-level layers: stem conv, BN, ReLU, three residual blocks, pool, fc. Each
// layer's input shape per sample, and the split by parameters (the last block holds 3/4).
TEST(PipelinePartition, ResNetShapesAndSplit) {
  auto model = makeResNet(1);
  const auto shapes = layerInputShapes(*model);
  ASSERT_EQ(shapes.size(), 9u);
  EXPECT_EQ(shapes[0], (std::vector<int>{1, 28, 28}));
  EXPECT_EQ(shapes[3], (std::vector<int>{16, 28, 28}));
  EXPECT_EQ(shapes[5], (std::vector<int>{32, 14, 14}));
  EXPECT_EQ(shapes[6], (std::vector<int>{64, 7, 7}));
  EXPECT_EQ(shapes[8], (std::vector<int>{10}));
  const auto ranges = layerParamRanges(model->net, model->store.numParams());
  EXPECT_EQ(partitionLayers(paramCosts(ranges), 2), (StageBounds{0, 5, 8}));
  // The eval-mode probe left the batch-norm running statistics alone (mean 0, variance 1).
  const ParamStore& store = model->store;
  for (const ParamView& v : store.bufferViews()) {
    const float want = v.name.find("running_var") != std::string::npos ? 1.0f : 0.0f;
    for (size_t i = 0; i < v.size; ++i) ASSERT_EQ(store.buffers()[v.offset + i], want) << v.name;
  }
}

TEST(PipelineLayout, RanksToStagesAndReplicas) {
  const PipelineLayout a = pipelineLayout(3, 4, 2);
  EXPECT_EQ(a.replicas, 2);
  EXPECT_EQ(a.stage, 1);
  EXPECT_EQ(a.pipeline, 1);
  EXPECT_EQ(a.prevRank, 2);
  EXPECT_EQ(a.nextRank, -1);
  const PipelineLayout b = pipelineLayout(4, 6, 3);
  EXPECT_EQ(b.stage, 1);
  EXPECT_EQ(b.pipeline, 1);
  EXPECT_EQ(b.prevRank, 3);
  EXPECT_EQ(b.nextRank, 5);
  try {
    pipelineLayout(0, 4, 3);
    FAIL() << "3 stages on 4 ranks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--stages 3 does not divide the 4 ranks"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace braid::trainer
