// braid-train's checkpoint decoder (trainer/train/checkpoint.h: decodeCheckpoint) from bytes. The
// first input byte picks how the rest is read:
//   even: as a file on disk, whole (magic, version, length and checksum checked first).
//   odd:  as a checkpoint body: magic, version, length and checksum are set right before decoding,
//         so the fields behind them get fuzzed too (random bytes never pass an FNV-1a check).
// What decodes must re-encode to bytes that decode to the same encoding. braid::Error
// (kInvalidUsage for a corrupt file) is the refusal braid promises; anything else is a finding.
#include "trainer/train/checkpoint.h"

#include <cstring>
#include <vector>

#include "common/error.h"
#include "fuzz/fixture.h"

namespace trainer = braid::trainer;
using braid::fuzz::broken;

namespace {

constexpr size_t kLengthAt = 16;  // magic (8), version (4), reserved (4), then the length
constexpr size_t kChecksumBytes = 8;

uint64_t fnv1a(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Makes the framing of `bytes` right: magic, version, total length and checksum.
void repair(std::vector<char>& bytes) {
  if (bytes.size() < kLengthAt + 8 + kChecksumBytes) bytes.resize(kLengthAt + 8 + kChecksumBytes);
  std::memcpy(bytes.data(), "BRAIDCKP", 8);
  const uint32_t version = trainer::kCheckpointVersion;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  const uint64_t total = bytes.size();
  std::memcpy(bytes.data() + kLengthAt, &total, sizeof total);
  const size_t body = bytes.size() - kChecksumBytes;
  const uint64_t sum = fnv1a(bytes.data(), body);
  std::memcpy(bytes.data() + body, &sum, sizeof sum);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const braid::fuzz::Input in = braid::fuzz::split(data, size);
  std::vector<char> bytes(in.data, in.data + in.size);
  if (in.mode % 2 == 1) repair(bytes);
  try {
    const trainer::CheckpointState state = trainer::decodeCheckpoint(bytes, "fuzz");
    const std::vector<char> once = trainer::encodeCheckpoint(state);
    std::vector<char> twice;
    try {
      twice = trainer::encodeCheckpoint(trainer::decodeCheckpoint(once, "re-encoded"));
    } catch (const braid::Error& e) {
      broken(std::string("an encoded checkpoint does not decode: ") + e.what());
    }
    if (once != twice) broken("encode/decode changed a checkpoint");
  } catch (const braid::Error&) {
  }
  return 0;
}
