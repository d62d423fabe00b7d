// Fashion-MNIST in memory: normalised float32 images and int32 labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid::trainer {

/// Which half of the data set: 60000 training or 10000 test samples for Fashion-MNIST.
enum class Split { kTrain, kTest };

/// "train" or "test".
const char* splitName(Split split);

/// Where Debian's dataset-fashion-mnist package puts the files; `--data DIR` overrides it.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
/// Mean and standard deviation of the Fashion-MNIST training pixels scaled to [0, 1], the values
/// commonly used with torchvision's Normalize((0.2860,), (0.3530,)). Pixels become
/// (x / 255 - mean) / std, so the training set has mean ~0 and std ~1.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

/// Images and labels, sample i being images[i*imageSize() .. (i+1)*imageSize()) and labels[i].
struct Dataset {
  int64_t count = 0;            ///< number of samples
  int64_t rows = 0;             ///< image height in pixels
  int64_t cols = 0;             ///< image width in pixels
  std::vector<float> images;    ///< count x rows x cols, row-major, normalised
  std::vector<int32_t> labels;  ///< count labels in 0..9

  /// Pixels per image (rows x cols).
  int64_t imageSize() const { return rows * cols; }
};

/// Maps a raw pixel to its normalised value: (x / 255 - mean) / std.
float normalizePixel(uint8_t x, float mean = kFashionMnistMean, float std = kFashionMnistStd);

/// Loads an idx3 image file and an idx1 label file (each plain or gzip) into a Dataset with
/// pixels normalised by `mean`/`std`. Throws Error(kInvalidUsage) naming the file on any format
/// problem (see idx.h), and naming both files when their counts differ.
Dataset loadIdxDataset(const std::string& imagesPath, const std::string& labelsPath,
                       float mean = kFashionMnistMean, float std = kFashionMnistStd);

/// The files of a split in `dir`: {train,t10k}-{images-idx3,labels-idx1}-ubyte, each taken with
/// a ".gz" suffix when that exists and plain otherwise. Throws Error(kInvalidUsage) when `dir` or
/// a file is missing; the message names it and suggests `--data DIR` or installing Debian's
/// dataset-fashion-mnist package.
std::string fashionMnistImagesPath(const std::string& dir, Split split);
std::string fashionMnistLabelsPath(const std::string& dir, Split split);

/// Loads Fashion-MNIST's `split` from `dir` (28 x 28 images, labels 0..9), normalised with
/// kFashionMnistMean/kFashionMnistStd. Takes about half a second for the training split.
/// Errors: as fashionMnist*Path and loadIdxDataset.
Dataset loadFashionMnist(const std::string& dir = kDefaultFashionMnistDir,
                         Split split = Split::kTrain);

}  // namespace braid::trainer
