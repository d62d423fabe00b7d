// IDX files (the MNIST format): a big-endian magic and dimension sizes, then raw unsigned bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace braid::trainer {

/// Magic of an idx3 file of unsigned bytes: 0x00 0x00, type 0x08 (ubyte), 3 dimensions.
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
/// Magic of an idx1 file of unsigned bytes: 0x00 0x00, type 0x08 (ubyte), 1 dimension.
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
/// Fashion-MNIST (and MNIST) classes: labels are 0..9.
inline constexpr int kNumClasses = 10;
/// Fashion-MNIST image side in pixels.
inline constexpr int64_t kImageSide = 28;

/// Images of an idx3 file: count x rows x cols unsigned bytes, row-major, image after image.
struct IdxImages {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;
};

/// Parses idx3 unsigned-byte images from `bytes` (already decompressed); `name` (the file) starts
/// every message. `rows`/`cols` are the expected image shape, 0 for any. Checks the magic (type
/// code and dimension count), that the header is complete, the shape, and that the data after the
/// 16-byte header is exactly count x rows x cols bytes. Throws Error(kInvalidUsage) saying what
/// was expected and what was found.
IdxImages parseIdxImages(std::span<const uint8_t> bytes, const std::string& name,
                         int64_t rows = kImageSide, int64_t cols = kImageSide);

/// Parses idx1 unsigned-byte labels: checks the magic, the 8-byte header, that the data is exactly
/// count bytes, and that every label is in 0..numClasses-1. Throws Error(kInvalidUsage) naming
/// `name`, the expected and the found value (and the index of a bad label).
std::vector<uint8_t> parseIdxLabels(std::span<const uint8_t> bytes, const std::string& name,
                                    int numClasses = kNumClasses);

/// Reads and parses an idx3 image file, plain or gzip (detected by magic bytes, not the name).
/// Errors as parseIdxImages plus readFileBytes's (missing file, corrupt gzip, read failure).
IdxImages readIdxImages(const std::string& path, int64_t rows = kImageSide,
                        int64_t cols = kImageSide);

/// Reads and parses an idx1 label file, plain or gzip. Errors as parseIdxLabels and readFileBytes.
std::vector<uint8_t> readIdxLabels(const std::string& path, int numClasses = kNumClasses);

/// "unsigned byte, 3 dimensions" for 0x00000803; "not an IDX file" when the first two bytes are
/// not zero. Used in messages.
std::string describeIdxMagic(uint32_t magic);

}  // namespace braid::trainer
