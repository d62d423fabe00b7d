#include "trainer/data/idx.h"

#include <utility>

#include "common/error.h"
#include "trainer/data/file_bytes.h"

namespace braid::trainer {
namespace {

uint32_t readBigEndian32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

const char* idxTypeName(uint32_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

constexpr size_t kImagesHeaderBytes = 16;  // magic and three sizes

const char* plural(uint64_t n) { return n == 1 ? "" : "s"; }

/// Checks the magic and returns the dimension sizes it announces (its low byte says how many).
std::vector<uint64_t> parseHeader(std::span<const uint8_t> bytes, const std::string& name,
                                  uint32_t expectedMagic) {
  const uint32_t dims = expectedMagic & 0xff;
  const size_t headerBytes = 4 + 4 * size_t{dims};
  BRAID_ENFORCE(bytes.size() >= 4, ErrorCode::kInvalidUsage,
                "{}: expected magic 0x{:08x} ({}), found a file of only {} byte{}", name,
                expectedMagic, describeIdxMagic(expectedMagic), bytes.size(), plural(bytes.size()));
  const uint32_t magic = readBigEndian32(bytes.data());
  BRAID_ENFORCE(magic == expectedMagic, ErrorCode::kInvalidUsage,
                "{}: expected magic 0x{:08x} ({}), found 0x{:08x} ({})", name, expectedMagic,
                describeIdxMagic(expectedMagic), magic, describeIdxMagic(magic));
  BRAID_ENFORCE(bytes.size() >= headerBytes, ErrorCode::kInvalidUsage,
                "{}: truncated header: expected {} bytes (magic and {} dimension size{}), found {}",
                name, headerBytes, dims, plural(dims), bytes.size());
  std::vector<uint64_t> sizes(dims);
  for (uint32_t d = 0; d < dims; ++d) sizes[d] = readBigEndian32(bytes.data() + 4 + 4 * d);
  return sizes;
}

/// Checks that exactly count items of itemBytes follow the header.
void checkLength(std::span<const uint8_t> bytes, const std::string& name, size_t headerBytes,
                 uint64_t count, uint64_t itemBytes) {
  const uint64_t have = bytes.size() - headerBytes;
  uint64_t want = 0;
  BRAID_ENFORCE(!__builtin_mul_overflow(count, itemBytes, &want), ErrorCode::kInvalidUsage,
                "{}: header says {} items of {} bytes, which overflows 64 bits", name, count,
                itemBytes);
  BRAID_ENFORCE(have >= want, ErrorCode::kInvalidUsage,
                "{}: truncated: header says {} items of {} byte{}, file has {} byte{} of data "
                "after its {}-byte header",
                name, count, itemBytes, plural(itemBytes), have, plural(have), headerBytes);
  BRAID_ENFORCE(have == want, ErrorCode::kInvalidUsage,
                "{}: {} extra byte{} at the end: header says {} items of {} byte{} ({} bytes of "
                "data), file has {}",
                name, have - want, plural(have - want), count, itemBytes, plural(itemBytes), want,
                have);
}

}  // namespace

std::string describeIdxMagic(uint32_t magic) {
  if ((magic >> 16) != 0) return "not an IDX file";
  const uint32_t dims = magic & 0xff;
  const char* type = idxTypeName((magic >> 8) & 0xff);
  std::string typeText =
      type ? std::string(type) : fmt::format("unknown type code 0x{:02x}", (magic >> 8) & 0xff);
  return fmt::format("{}, {} dimension{}", typeText, dims, plural(dims));
}

namespace {
/// Checks an idx3 image file and returns its shape, leaving `pixels` empty.
IdxImages checkIdxImages(std::span<const uint8_t> bytes, const std::string& name, int64_t rows,
                         int64_t cols) {
  const std::vector<uint64_t> dims = parseHeader(bytes, name, kIdxImagesMagic);
  BRAID_ENFORCE(dims[1] > 0 && dims[2] > 0, ErrorCode::kInvalidUsage,
                "{}: expected images of at least 1 x 1 pixels, found {} x {}", name, dims[1],
                dims[2]);
  BRAID_ENFORCE(
      (rows == 0 || dims[1] == uint64_t(rows)) && (cols == 0 || dims[2] == uint64_t(cols)),
      ErrorCode::kInvalidUsage, "{}: expected {} x {} images, found {} x {}", name, rows, cols,
      dims[1], dims[2]);
  checkLength(bytes, name, kImagesHeaderBytes, dims[0], dims[1] * dims[2]);
  IdxImages images;
  images.count = static_cast<int64_t>(dims[0]);
  images.rows = static_cast<int64_t>(dims[1]);
  images.cols = static_cast<int64_t>(dims[2]);
  return images;
}
}  // namespace

IdxImages parseIdxImages(std::span<const uint8_t> bytes, const std::string& name, int64_t rows,
                         int64_t cols) {
  IdxImages images = checkIdxImages(bytes, name, rows, cols);
  images.pixels.assign(bytes.begin() + kImagesHeaderBytes, bytes.end());
  return images;
}

std::vector<uint8_t> parseIdxLabels(std::span<const uint8_t> bytes, const std::string& name,
                                    int numClasses) {
  BRAID_ENFORCE(numClasses > 0 && numClasses <= 256, ErrorCode::kInvalidUsage,
                "{}: numClasses must be in 1..256, got {}", name, numClasses);
  const std::vector<uint64_t> dims = parseHeader(bytes, name, kIdxLabelsMagic);
  const size_t headerBytes = 8;
  checkLength(bytes, name, headerBytes, dims[0], 1);
  std::vector<uint8_t> labels(bytes.begin() + headerBytes, bytes.end());
  for (size_t i = 0; i < labels.size(); ++i) {
    BRAID_ENFORCE(labels[i] < numClasses, ErrorCode::kInvalidUsage,
                  "{}: expected labels in 0..{}, found {} at index {}", name, numClasses - 1,
                  labels[i], i);
  }
  return labels;
}

namespace {
/// The name used in messages: the path, marked when its length checks apply to gunzipped data.
std::string messageName(const std::string& path, bool gzip) {
  return gzip ? path + " (gunzipped)" : path;
}
}  // namespace

IdxImages readIdxImages(const std::string& path, int64_t rows, int64_t cols) {
  FileBytes file = readFileBytes(path);
  IdxImages images = checkIdxImages(file.bytes, messageName(path, file.gzip), rows, cols);
  // Reuse the file's buffer rather than copying tens of megabytes of pixels.
  file.bytes.erase(file.bytes.begin(), file.bytes.begin() + kImagesHeaderBytes);
  images.pixels = std::move(file.bytes);
  return images;
}

std::vector<uint8_t> readIdxLabels(const std::string& path, int numClasses) {
  FileBytes file = readFileBytes(path);
  return parseIdxLabels(file.bytes, messageName(path, file.gzip), numClasses);
}

}  // namespace braid::trainer
