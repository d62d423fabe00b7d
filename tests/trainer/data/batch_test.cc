#include "trainer/data/batch.h"

#include <gtest/gtest.h>

#include "tests/trainer/data/idx_files.h"

namespace braid::trainer {
namespace {

using testing::expectError;

Dataset tinyDataset() {
  Dataset data;
  data.count = 6;
  data.rows = 2;
  data.cols = 3;
  for (int64_t s = 0; s < data.count; ++s) {
    for (int p = 0; p < 6; ++p) data.images.push_back(float(s * 100 + p));
    data.labels.push_back(int32_t(9 - s));
  }
  return data;
}

TEST(GatherBatch, CopiesSelectedSamplesInOrder) {
  const Dataset data = tinyDataset();
  const std::vector<int64_t> indices = {4, 0, 4, 5};
  std::vector<float> images(5 * 6, -1.0f);  // room for 5, one left untouched
  std::vector<int32_t> labels(5, -1);
  gatherBatch(data, indices, images, labels);
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int p = 0; p < 6; ++p) {
      EXPECT_EQ(images[i * 6 + p], float(indices[i] * 100 + p)) << i << "," << p;
    }
    EXPECT_EQ(labels[i], 9 - indices[i]);
  }
  for (int p = 0; p < 6; ++p) EXPECT_EQ(images[4 * 6 + p], -1.0f);
  EXPECT_EQ(labels[4], -1);
}

TEST(GatherBatch, RefusesBadIndexOrSmallBuffers) {
  const Dataset data = tinyDataset();
  std::vector<float> images(3 * 6, -1.0f);
  std::vector<int32_t> labels(3, -1);
  const std::vector<int64_t> bad = {1, 6};
  expectError([&] { gatherBatch(data, bad, images, labels); }, ErrorCode::kInvalidUsage,
              {"index 6", "position 1", "0..5"});
  EXPECT_EQ(images[0], -1.0f) << "nothing written on error";
  const std::vector<int64_t> four = {0, 1, 2, 3};
  expectError([&] { gatherBatch(data, four, images, labels); }, ErrorCode::kInvalidUsage,
              {"image buffer holds 18 floats", "needs 24"});
  std::vector<float> bigImages(4 * 6);
  expectError([&] { gatherBatch(data, four, bigImages, labels); }, ErrorCode::kInvalidUsage,
              {"label buffer holds 3", "needs 4"});
}

}  // namespace
}  // namespace braid::trainer
