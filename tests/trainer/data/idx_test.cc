#include "trainer/data/idx.h"

#include <gtest/gtest.h>

#include "tests/trainer/data/idx_files.h"
#include "trainer/data/file_bytes.h"

namespace braid::trainer {
namespace {

using testing::expectError;
using testing::gzipBytes;
using testing::idxImagesBytes;
using testing::idxLabelsBytes;
using testing::TempDir;
using testing::testPixels;
using testing::writeFile;

constexpr uint32_t kCount = 7;
constexpr uint32_t kSide = 28;

std::vector<uint8_t> someLabels(size_t n) {
  std::vector<uint8_t> labels(n);
  for (size_t i = 0; i < n; ++i) labels[i] = uint8_t((i * 7 + 3) % 10);
  return labels;
}

TEST(IdxReader, PlainFilesReadBackExactly) {
  TempDir dir;
  const auto pixels = testPixels(kCount * kSide * kSide, 1);
  const auto labels = someLabels(kCount);
  writeFile(dir.file("images"), idxImagesBytes(kCount, kSide, kSide, pixels));
  writeFile(dir.file("labels"), idxLabelsBytes(labels));

  IdxImages images = readIdxImages(dir.file("images"));
  EXPECT_EQ(images.count, kCount);
  EXPECT_EQ(images.rows, kSide);
  EXPECT_EQ(images.cols, kSide);
  ASSERT_EQ(images.pixels.size(), pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) ASSERT_EQ(images.pixels[i], pixels[i]) << i;
  EXPECT_EQ(readIdxLabels(dir.file("labels")), labels);
}

TEST(IdxReader, GzipIsDetectedByMagicNotName) {
  TempDir dir;
  const auto pixels = testPixels(kCount * kSide * kSide, 2);
  const auto labels = someLabels(kCount);
  // Gzip content under a plain name, and plain content under a .gz name: both read correctly.
  writeFile(dir.file("images-no-suffix"), gzipBytes(idxImagesBytes(kCount, kSide, kSide, pixels)));
  writeFile(dir.file("labels.gz"), idxLabelsBytes(labels));
  EXPECT_TRUE(readFileBytes(dir.file("images-no-suffix")).gzip);
  EXPECT_FALSE(readFileBytes(dir.file("labels.gz")).gzip);
  IdxImages images = readIdxImages(dir.file("images-no-suffix"));
  EXPECT_EQ(images.count, kCount);
  EXPECT_EQ(images.pixels, pixels);
  EXPECT_EQ(readIdxLabels(dir.file("labels.gz")), labels);
}

TEST(IdxReader, ConcatenatedGzipMembersAreJoined) {
  TempDir dir;
  const auto labels = someLabels(1000);
  const auto whole = idxLabelsBytes(labels);
  const std::vector<uint8_t> first(whole.begin(), whole.begin() + 300);
  const std::vector<uint8_t> second(whole.begin() + 300, whole.end());
  auto bytes = gzipBytes(first);
  const auto tail = gzipBytes(second);
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  writeFile(dir.file("labels.gz"), bytes);
  EXPECT_EQ(readIdxLabels(dir.file("labels.gz")), labels);
}

TEST(IdxReader, OtherShapesWhenAsked) {
  TempDir dir;
  const auto pixels = testPixels(3 * 5 * 4, 3);
  writeFile(dir.file("small"), idxImagesBytes(3, 5, 4, pixels));
  IdxImages images = readIdxImages(dir.file("small"), 0, 0);
  EXPECT_EQ(images.rows, 5);
  EXPECT_EQ(images.cols, 4);
  EXPECT_EQ(images.pixels, pixels);
  expectError([&] { readIdxImages(dir.file("small")); }, ErrorCode::kInvalidUsage,
              {dir.file("small"), "expected 28 x 28 images, found 5 x 4"});
}

TEST(IdxErrors, WrongMagicNamesFileExpectedAndFound) {
  TempDir dir;
  const std::string path = dir.file("train-labels-idx1-ubyte.gz");
  writeFile(path, gzipBytes(idxImagesBytes(1, kSide, kSide, testPixels(kSide * kSide, 4))));
  expectError([&] { readIdxLabels(path); }, ErrorCode::kInvalidUsage,
              {path, "expected magic 0x00000801", "found 0x00000803"});
  const std::string text = dir.file("notes.txt");
  writeFile(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  expectError([&] { readIdxImages(text); }, ErrorCode::kInvalidUsage,
              {text, "expected magic 0x00000803", "not an IDX file"});
}

TEST(IdxErrors, WrongTypeCodeOrDimensionCount) {
  TempDir dir;
  // int32 labels (type code 0x0C) and a 2-dimensional "image" file.
  writeFile(dir.file("int-labels"), idxLabelsBytes(someLabels(4), -1, 0x00000C01));
  expectError([&] { readIdxLabels(dir.file("int-labels")); }, ErrorCode::kInvalidUsage,
              {dir.file("int-labels"), "expected magic 0x00000801", "found 0x00000c01", "int32"});
  std::vector<uint8_t> twoDims;
  testing::putBigEndian32(twoDims, 0x00000802);
  testing::putBigEndian32(twoDims, 2);
  testing::putBigEndian32(twoDims, 3);
  twoDims.resize(twoDims.size() + 6);
  writeFile(dir.file("matrix"), twoDims);
  expectError(
      [&] { readIdxImages(dir.file("matrix")); }, ErrorCode::kInvalidUsage,
      {dir.file("matrix"), "expected magic 0x00000803", "found 0x00000802", "2 dimensions"});
}

TEST(IdxErrors, WrongImageDimensions) {
  TempDir dir;
  writeFile(dir.file("images"), idxImagesBytes(2, 27, 28, testPixels(2 * 27 * 28, 5)));
  expectError([&] { readIdxImages(dir.file("images")); }, ErrorCode::kInvalidUsage,
              {dir.file("images"), "expected 28 x 28 images, found 27 x 28"});
  writeFile(dir.file("empty-images"), idxImagesBytes(2, 0, 28, {}));
  expectError([&] { readIdxImages(dir.file("empty-images"), 0, 0); }, ErrorCode::kInvalidUsage,
              {dir.file("empty-images"), "found 0 x 28"});
}

TEST(IdxErrors, TruncatedData) {
  TempDir dir;
  auto labels = someLabels(60);
  writeFile(dir.file("labels"),
            idxLabelsBytes(std::vector<uint8_t>(labels.begin(), labels.end() - 10), 60));
  expectError([&] { readIdxLabels(dir.file("labels")); }, ErrorCode::kInvalidUsage,
              {dir.file("labels"), "truncated: header says 60 items of 1 byte, file has 50"});
  auto images = idxImagesBytes(kCount, kSide, kSide, testPixels(kCount * kSide * kSide, 6));
  images.resize(images.size() - 1);
  writeFile(dir.file("images.gz"), gzipBytes(images));
  expectError([&] { readIdxImages(dir.file("images.gz")); }, ErrorCode::kInvalidUsage,
              {dir.file("images.gz"), "truncated: header says 7 items of 784 bytes", "5487"});
}

TEST(IdxErrors, TruncatedHeader) {
  TempDir dir;
  writeFile(dir.file("short"), {0, 0, 8});
  expectError([&] { readIdxLabels(dir.file("short")); }, ErrorCode::kInvalidUsage,
              {dir.file("short"), "expected magic 0x00000801", "only 3 bytes"});
  writeFile(dir.file("short-images"), {0, 0, 8, 3, 0, 0, 0, 1, 0, 0});
  expectError([&] { readIdxImages(dir.file("short-images")); }, ErrorCode::kInvalidUsage,
              {dir.file("short-images"), "truncated header: expected 16 bytes", "found 10"});
}

TEST(IdxErrors, ExtraBytes) {
  TempDir dir;
  auto bytes = idxLabelsBytes(someLabels(20), 18);
  writeFile(dir.file("labels"), bytes);
  expectError([&] { readIdxLabels(dir.file("labels")); }, ErrorCode::kInvalidUsage,
              {dir.file("labels"), "2 extra bytes", "header says 18 items"});
}

TEST(IdxErrors, LabelOutOfRange) {
  TempDir dir;
  auto labels = someLabels(20);
  labels[13] = 12;
  writeFile(dir.file("labels.gz"), gzipBytes(idxLabelsBytes(labels)));
  expectError([&] { readIdxLabels(dir.file("labels.gz")); }, ErrorCode::kInvalidUsage,
              {dir.file("labels.gz"), "expected labels in 0..9, found 12 at index 13"});
}

TEST(IdxErrors, MissingFile) {
  TempDir dir;
  expectError([&] { readIdxLabels(dir.file("nope")); }, ErrorCode::kInvalidUsage,
              {dir.file("nope"), "no such file"});
  expectError([&] { readIdxImages(dir.path()); }, ErrorCode::kInvalidUsage,
              {dir.path(), "expected a regular file"});
}

TEST(IdxErrors, CorruptOrTruncatedGzip) {
  TempDir dir;
  const auto gz = gzipBytes(idxLabelsBytes(someLabels(5000)));
  writeFile(dir.file("cut.gz"), std::vector<uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
  expectError([&] { readIdxLabels(dir.file("cut.gz")); }, ErrorCode::kInvalidUsage,
              {dir.file("cut.gz"), "gzip stream truncated"});
  auto bad = gz;
  for (size_t i = 12; i < 40 && i < bad.size(); ++i) bad[i] ^= 0x5a;
  writeFile(dir.file("bad.gz"), bad);
  expectError([&] { readIdxLabels(dir.file("bad.gz")); }, ErrorCode::kInvalidUsage,
              {dir.file("bad.gz"), "gzip"});
  auto junk = gz;
  junk.insert(junk.end(), {1, 2, 3});
  writeFile(dir.file("junk.gz"), junk);
  expectError([&] { readIdxLabels(dir.file("junk.gz")); }, ErrorCode::kInvalidUsage,
              {dir.file("junk.gz"), "found 3 more bytes"});
}

TEST(IdxMagic, Describes) {
  EXPECT_EQ(describeIdxMagic(0x00000803), "unsigned byte, 3 dimensions");
  EXPECT_EQ(describeIdxMagic(0x00000801), "unsigned byte, 1 dimension");
  EXPECT_EQ(describeIdxMagic(0x00000d02), "float32, 2 dimensions");
  EXPECT_EQ(describeIdxMagic(0x00004201), "unknown type code 0x42, 1 dimension");
  EXPECT_EQ(describeIdxMagic(0x1f8b0800), "not an IDX file");
}

}  // namespace
}  // namespace braid::trainer
