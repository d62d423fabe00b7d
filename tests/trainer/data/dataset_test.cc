#include "trainer/data/dataset.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "tests/support/skip.h"
#include "tests/trainer/data/idx_files.h"

namespace braid::trainer {
namespace {

using testing::expectError;
using testing::gzipBytes;
using testing::idxImagesBytes;
using testing::idxLabelsBytes;
using testing::TempDir;
using testing::testPixels;
using testing::writeFile;

constexpr uint32_t kSide = 28;

/// Writes a split's two files into `dir` with Fashion-MNIST's names.
void writeSplit(const TempDir& dir, const std::string& prefix, uint32_t count, bool gzip,
                const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& labels) {
  auto images = idxImagesBytes(count, kSide, kSide, pixels);
  auto labelBytes = idxLabelsBytes(labels);
  const std::string suffix = gzip ? ".gz" : "";
  writeFile(dir.file(prefix + "-images-idx3-ubyte" + suffix), gzip ? gzipBytes(images) : images);
  writeFile(dir.file(prefix + "-labels-idx1-ubyte" + suffix),
            gzip ? gzipBytes(labelBytes) : labelBytes);
}

TEST(Dataset, NormalisesWithDocumentedMeanAndStd) {
  EXPECT_FLOAT_EQ(normalizePixel(0), -0.2860f / 0.3530f);
  EXPECT_FLOAT_EQ(normalizePixel(255), (1.0f - 0.2860f) / 0.3530f);
  EXPECT_FLOAT_EQ(normalizePixel(51, 0.5f, 2.0f), (0.2f - 0.5f) / 2.0f);
}

TEST(Dataset, LoadsSyntheticSplitsPlainAndGzip) {
  TempDir dir;
  const uint32_t trainCount = 9, testCount = 4;
  const auto trainPixels = testPixels(trainCount * kSide * kSide, 10);
  const auto testPixelsData = testPixels(testCount * kSide * kSide, 11);
  const std::vector<uint8_t> trainLabels = {0, 9, 1, 8, 2, 7, 3, 6, 4};
  const std::vector<uint8_t> testLabels = {5, 5, 0, 9};
  writeSplit(dir, "train", trainCount, true, trainPixels, trainLabels);
  writeSplit(dir, "t10k", testCount, false, testPixelsData, testLabels);

  for (Split split : {Split::kTrain, Split::kTest}) {
    SCOPED_TRACE(splitName(split));
    const bool train = split == Split::kTrain;
    const auto& pixels = train ? trainPixels : testPixelsData;
    const auto& labels = train ? trainLabels : testLabels;
    Dataset data = loadFashionMnist(dir.path(), split);
    ASSERT_EQ(data.count, int64_t(labels.size()));
    EXPECT_EQ(data.rows, 28);
    EXPECT_EQ(data.cols, 28);
    EXPECT_EQ(data.imageSize(), 784);
    ASSERT_EQ(data.images.size(), pixels.size());
    for (size_t i = 0; i < pixels.size(); ++i) {
      ASSERT_EQ(data.images[i], normalizePixel(pixels[i])) << "pixel " << i;
    }
    ASSERT_EQ(data.labels.size(), labels.size());
    for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(data.labels[i], labels[i]) << i;
  }
  EXPECT_EQ(fashionMnistImagesPath(dir.path(), Split::kTrain),
            dir.file("train-images-idx3-ubyte.gz"));
  EXPECT_EQ(fashionMnistLabelsPath(dir.path(), Split::kTest), dir.file("t10k-labels-idx1-ubyte"));
}

TEST(Dataset, CountMismatchNamesBothFiles) {
  TempDir dir;
  writeSplit(dir, "train", 5, true, testPixels(5 * kSide * kSide, 12), {1, 2, 3, 4});
  expectError([&] { loadFashionMnist(dir.path(), Split::kTrain); }, ErrorCode::kInvalidUsage,
              {dir.file("train-images-idx3-ubyte.gz"), "has 5 images",
               dir.file("train-labels-idx1-ubyte.gz"), "has 4 labels"});
}

TEST(Dataset, MissingDirectoryOrFileSaysWhichAndHowToFix) {
  TempDir dir;
  const std::string absent = dir.file("no-such-dir");
  expectError([&] { loadFashionMnist(absent, Split::kTrain); }, ErrorCode::kInvalidUsage,
              {absent, "does not exist", "--data DIR", "dataset-fashion-mnist"});
  writeSplit(dir, "train", 1, false, testPixels(kSide * kSide, 13), {3});
  std::filesystem::remove(dir.file("train-labels-idx1-ubyte"));
  expectError([&] { loadFashionMnist(dir.path(), Split::kTrain); }, ErrorCode::kInvalidUsage,
              {dir.file("train-labels-idx1-ubyte.gz"), dir.file("train-labels-idx1-ubyte"),
               "--data DIR", "dataset-fashion-mnist"});
  expectError([&] { loadFashionMnist(dir.path(), Split::kTest); }, ErrorCode::kInvalidUsage,
              {dir.file("t10k-images-idx3-ubyte.gz"), "--data DIR"});
}

TEST(Dataset, CorruptFileInADirectoryIsNamed) {
  TempDir dir;
  auto labels = std::vector<uint8_t>{1, 2, 12};
  writeSplit(dir, "t10k", 3, true, testPixels(3 * kSide * kSide, 14), labels);
  expectError([&] { loadFashionMnist(dir.path(), Split::kTest); }, ErrorCode::kInvalidUsage,
              {dir.file("t10k-labels-idx1-ubyte.gz"), "found 12 at index 2"});
}

/// Gunzips a whole file with zlib's own gz reader: an independent path to the raw bytes.
std::vector<uint8_t> gunzipFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::vector<uint8_t> out;
  if (f == nullptr) return out;
  std::vector<uint8_t> chunk(1 << 20);
  int got;
  while ((got = gzread(f, chunk.data(), unsigned(chunk.size()))) > 0) {
    out.insert(out.end(), chunk.begin(), chunk.begin() + got);
  }
  gzclose(f);
  return out;
}

TEST(FashionMnist, DebianFilesLoad) {
  const std::string dir = kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-labels-idx1-ubyte.gz")) {
    BRAID_SKIP_MISSING("Debian's dataset-fashion-mnist is not installed (" + std::string(dir) +
                       ")");
  }
  for (Split split : {Split::kTrain, Split::kTest}) {
    SCOPED_TRACE(splitName(split));
    const bool train = split == Split::kTrain;
    const std::string prefix = dir + (train ? "/train" : "/t10k");
    Dataset data = loadFashionMnist(dir, split);
    ASSERT_EQ(data.count, train ? 60000 : 10000);
    EXPECT_EQ(data.rows, 28);
    EXPECT_EQ(data.cols, 28);
    ASSERT_EQ(data.images.size(), size_t(data.count) * 784);

    const auto rawLabels = gunzipFile(prefix + "-labels-idx1-ubyte.gz");
    ASSERT_EQ(rawLabels.size(), 8 + size_t(data.count));
    for (int64_t i = 0; i < data.count; ++i) {
      ASSERT_EQ(data.labels[i], rawLabels[8 + i]) << "label " << i;
    }
    int counts[10] = {};
    for (int32_t label : data.labels) counts[label]++;
    for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c], data.count / 10) << "class " << c;

    const auto rawImages = gunzipFile(prefix + "-images-idx3-ubyte.gz");
    ASSERT_EQ(rawImages.size(), 16 + data.images.size());
    // Every pixel of the first and last images, and a stride through the rest.
    for (size_t i = 0; i < data.images.size();
         i += (i < 784 || i >= data.images.size() - 784) ? 1 : 97) {
      ASSERT_EQ(data.images[i], normalizePixel(rawImages[16 + i])) << "pixel " << i;
    }
  }
}

}  // namespace
}  // namespace braid::trainer
