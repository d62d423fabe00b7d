// float16 blocks through AVX-512 (16 lanes) or F16C (8 lanes): convert a block of each input to
// float32, apply the op lane by lane (the compiler turns that loop into one vector op), round the
// block back. Each block reads all its inputs before writing, so exact aliasing is safe.
// Internal to kernels/; BRAID_KERNELS_HALF_SIMD is 0 where the build has neither.
#pragma once

#include <cstddef>
#include <cstring>

#if defined(__AVX512F__) || defined(__F16C__)
#define BRAID_KERNELS_HALF_SIMD 1
// GCC 12's _mm512_cvtps_ph uses a self-initialised "undefined" vector, a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#else
#define BRAID_KERNELS_HALF_SIMD 0
#endif

namespace braid::kernels::detail {

#if BRAID_KERNELS_HALF_SIMD

#if defined(__AVX512F__)
inline constexpr size_t kHalfLanes = 16;
inline void loadHalfBlock(float* out, const char* p) {
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}
inline void storeHalfBlock(char* p, const float* in) {
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(p),
      _mm512_cvtps_ph(_mm512_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#else
inline constexpr size_t kHalfLanes = 8;
inline void loadHalfBlock(float* out, const char* p) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void storeHalfBlock(char* p, const float* in) {
  _mm_storeu_si128(
      reinterpret_cast<__m128i*>(p),
      _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#endif

/// dst = a op b over whole blocks of float16; returns the elements done (a multiple of
/// kHalfLanes), leaving the tail to the caller.
template <typename Op>
inline size_t halfReduceBlocks(void* dst, const void* a, const void* b, size_t n) {
  const Op op;
  auto* d = static_cast<char*>(dst);
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  size_t i = 0;
  for (; i + kHalfLanes <= n; i += kHalfLanes) {
    alignas(64) float x[kHalfLanes];
    alignas(64) float y[kHalfLanes];
    loadHalfBlock(x, pa + 2 * i);
    loadHalfBlock(y, pb + 2 * i);
    for (size_t j = 0; j < kHalfLanes; ++j) x[j] = op(x[j], y[j]);
    storeHalfBlock(d + 2 * i, x);
  }
  return i;
}

/// acc[i] = op(acc[i], float(src[i])) over whole blocks of float16; returns the elements done.
template <typename Op>
inline size_t halfAccumulateBlocks(float* acc, const void* src, size_t n) {
  const Op op;
  const auto* ps = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + kHalfLanes <= n; i += kHalfLanes) {
    // Copies in and out of locals: with acc[] indexed directly GCC 12 did not vectorise the op.
    alignas(64) float x[kHalfLanes];
    alignas(64) float y[kHalfLanes];
    std::memcpy(x, acc + i, sizeof x);
    loadHalfBlock(y, ps + 2 * i);
    for (size_t j = 0; j < kHalfLanes; ++j) x[j] = op(x[j], y[j]);
    std::memcpy(acc + i, x, sizeof x);
  }
  return i;
}

#endif  // BRAID_KERNELS_HALF_SIMD

}  // namespace braid::kernels::detail
