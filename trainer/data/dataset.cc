#include "trainer/data/dataset.h"

#include <array>
#include <filesystem>

#include "common/error.h"
#include "trainer/data/idx.h"

namespace braid::trainer {
namespace {

constexpr const char* kInstallHint =
    "pass --data DIR with the Fashion-MNIST IDX files, or install Debian's dataset-fashion-mnist "
    "package (apt-get install dataset-fashion-mnist) which puts them in "
    "/usr/share/datasets/fashion-mnist";

std::string findFile(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fail(ErrorCode::kInvalidUsage, "Fashion-MNIST directory {} {}; {}", dir,
         fs::exists(dir, ec) ? "is not a directory" : "does not exist", kInstallHint);
  }
  const fs::path base = fs::path(dir) / stem;
  const std::string gz = base.string() + ".gz";
  if (fs::exists(gz, ec)) return gz;
  if (fs::exists(base, ec)) return base.string();
  fail(ErrorCode::kInvalidUsage, "Fashion-MNIST file missing: found neither {} nor {}; {}", gz,
       base.string(), kInstallHint);
}

const char* splitPrefix(Split split) { return split == Split::kTrain ? "train" : "t10k"; }

}  // namespace

const char* splitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

float normalizePixel(uint8_t x, float mean, float std) {
  return (static_cast<float>(x) / 255.0f - mean) / std;
}

Dataset loadIdxDataset(const std::string& imagesPath, const std::string& labelsPath, float mean,
                       float std) {
  BRAID_ENFORCE(std > 0.0f, ErrorCode::kInvalidUsage,
                "loadIdxDataset({}): normalisation std must be positive, got {}", imagesPath, std);
  IdxImages raw = readIdxImages(imagesPath);
  std::vector<uint8_t> labels = readIdxLabels(labelsPath);
  BRAID_ENFORCE(raw.count == static_cast<int64_t>(labels.size()), ErrorCode::kInvalidUsage,
                "{} has {} images but {} has {} labels; expected equal counts", imagesPath,
                raw.count, labelsPath, labels.size());
  BRAID_ENFORCE(raw.count > 0, ErrorCode::kInvalidUsage,
                "{}: expected at least one image, found none", imagesPath);

  Dataset data;
  data.count = raw.count;
  data.rows = raw.rows;
  data.cols = raw.cols;
  std::array<float, 256> table;  // 256 possible pixels: map through a table, not per pixel
  for (int x = 0; x < 256; ++x) table[x] = normalizePixel(static_cast<uint8_t>(x), mean, std);
  data.images.resize(raw.pixels.size());
  for (size_t i = 0; i < raw.pixels.size(); ++i) data.images[i] = table[raw.pixels[i]];
  data.labels.assign(labels.begin(), labels.end());
  return data;
}

std::string fashionMnistImagesPath(const std::string& dir, Split split) {
  return findFile(dir, std::string(splitPrefix(split)) + "-images-idx3-ubyte");
}

std::string fashionMnistLabelsPath(const std::string& dir, Split split) {
  return findFile(dir, std::string(splitPrefix(split)) + "-labels-idx1-ubyte");
}

Dataset loadFashionMnist(const std::string& dir, Split split) {
  // Images first, so a missing-file error names the images file when both are absent.
  const std::string images = fashionMnistImagesPath(dir, split);
  const std::string labels = fashionMnistLabelsPath(dir, split);
  return loadIdxDataset(images, labels);
}

}  // namespace braid::trainer
