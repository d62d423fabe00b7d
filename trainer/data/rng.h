// Deterministic pseudo-random numbers that are the same on every platform and library, so every
// rank (and every rerun) shuffles identically. std::shuffle and std::uniform_int_distribution
// are not used because their output differs between standard libraries.
#pragma once

#include <array>
#include <cstdint>

namespace braid::trainer {

/// One step of SplitMix64 (Steele, Lea and Flood, 2014): advances `state` by the golden-ratio
/// increment and returns the mixed value. Used to expand one seed into xoshiro's state.
inline uint64_t splitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256** 1.0 (Blackman and Vigna, 2018): 256 bits of state, period 2^256 - 1. Seeding
/// fills the state with four SplitMix64 outputs, as its authors recommend. Not thread-safe; the
/// whole state can be saved and restored for checkpoints.
class Xoshiro256 {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& word : s_) word = splitMix64(seed);
  }
  /// Starts from a saved state (not all zero).
  explicit Xoshiro256(const State& state) : s_(state) {}

  /// The next 64 random bits.
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, bound) for bound > 0, without modulo bias: draws below the largest multiple
  /// of `bound` that fits in 64 bits are kept, others are redrawn.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (true) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

  const State& state() const { return s_; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

/// Fisher-Yates shuffle of `items[0..n)` driven by `rng.below`: for i = n-1 down to 1, swap item i
/// with item below(i + 1). The result depends only on the generator's state.
template <typename T>
void shuffleInPlace(T* items, uint64_t n, Xoshiro256& rng) {
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.below(i);
    T tmp = items[i - 1];
    items[i - 1] = items[j];
    items[j] = tmp;
  }
}

}  // namespace braid::trainer
