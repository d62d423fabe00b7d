// A small, portable, seedable random generator: same numbers on every platform and library.
#pragma once

#include <cstdint>

namespace braid::trainer {

/// SplitMix64 (Steele et al.): 64-bit state, one multiply-xorshift chain per draw. Used instead
/// of <random> distributions, whose outputs differ between standard libraries.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform01() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  /// Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform01(); }

 private:
  uint64_t state_;
};

}  // namespace braid::trainer
