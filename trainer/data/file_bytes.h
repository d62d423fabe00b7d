// Reading a whole file into memory, gunzipping it when its first bytes are the gzip magic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid::trainer {

/// A file's contents after decompression, and whether it was gzip.
struct FileBytes {
  std::vector<uint8_t> bytes;
  bool gzip = false;
};

/// Reads `path` whole. Gzip is detected by the magic bytes 0x1f 0x8b (not by the name) and
/// inflated, including files of several concatenated gzip members.
/// Throws Error(kInvalidUsage) naming `path` when it is missing, not a regular file, or holds a
/// corrupt or truncated gzip stream; Error(kSystemError) with errno's text when a read fails.
FileBytes readFileBytes(const std::string& path);

}  // namespace braid::trainer
