// What the fuzz targets and make_corpus.cc share: how an input is split, and the small world each
// target's receiver lives in (the seeds are made to pass its checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace braid::fuzz {

/// The input after its first byte, which picks what a target does with the rest.
struct Input {
  uint8_t mode = 0;
  const char* data = nullptr;
  size_t size = 0;
};

inline Input split(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  return {data[0], reinterpret_cast<const char*>(data + 1), size - 1};
}

/// A property of braid's own output failed: report and abort, so libFuzzer keeps the input.
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz: property broken: %s\n", what.c_str());
  std::abort();
}

// The receiving rank the transport targets play: rank kRank of kSize, job kJob with kSecret.
inline constexpr int kSize = 8;
inline constexpr int kRank = 5;
inline constexpr const char* kJob = "fuzzjob";
inline constexpr const char* kSecret = "fuzz-secret";
// tcp: rank 1 reaches kRank over another transport, rank 2 is connected already.
inline constexpr int kNotTcpPeer = 1;
inline constexpr int kConnectedPeer = 2;
// Channels of each link, slots per channel, slot bytes, messages posted on each send channel.
inline constexpr int kChannels = 2;
inline constexpr uint64_t kSlots = 4;
inline constexpr uint64_t kSlotBytes = 256;
inline constexpr uint64_t kPosted = 3;

}  // namespace braid::fuzz
