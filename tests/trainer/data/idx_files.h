// Helpers for the data tests: a temporary directory and synthetic IDX files, plain or gzip.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

namespace braid::trainer::testing {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/braid-data-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void putBigEndian32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(uint8_t(v >> 24));
  out.push_back(uint8_t(v >> 16));
  out.push_back(uint8_t(v >> 8));
  out.push_back(uint8_t(v));
}

/// An idx3 file's bytes: `magic`, then count, rows, cols, then the pixels as given.
inline std::vector<uint8_t> idxImagesBytes(uint32_t count, uint32_t rows, uint32_t cols,
                                           const std::vector<uint8_t>& pixels,
                                           uint32_t magic = 0x00000803) {
  std::vector<uint8_t> out;
  putBigEndian32(out, magic);
  putBigEndian32(out, count);
  putBigEndian32(out, rows);
  putBigEndian32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

/// An idx1 file's bytes: `magic`, `count` (the labels' size unless given), then the labels.
inline std::vector<uint8_t> idxLabelsBytes(const std::vector<uint8_t>& labels, int64_t count = -1,
                                           uint32_t magic = 0x00000801) {
  std::vector<uint8_t> out;
  putBigEndian32(out, magic);
  putBigEndian32(out, uint32_t(count < 0 ? labels.size() : count));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

/// Deterministic pseudo-random pixels (a simple LCG, only to fill test files).
inline std::vector<uint8_t> testPixels(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& p : out) {
    x = x * 1664525u + 1013904223u;
    p = uint8_t(x >> 24);
  }
  return out;
}

inline void writeFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(f.good()) << "writing " << path;
}

/// gzip-compresses `bytes` in memory (one member) with zlib's deflate.
inline std::vector<uint8_t> gzipBytes(const std::vector<uint8_t>& bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, bytes.size()) + 64);
  zs.next_in = const_cast<Bytef*>(bytes.data());
  zs.avail_in = uInt(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// Runs `fn`, expecting braid::Error with `code` whose message contains every one of `parts`.
inline void expectError(const std::function<void()>& fn, ErrorCode code,
                        const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error containing '" << (parts.empty() ? "" : parts[0]) << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message '" << e.what() << "' lacks '" << part << "'";
    }
  }
}

}  // namespace braid::trainer::testing
