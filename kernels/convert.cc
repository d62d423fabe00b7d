// Bulk float16/bfloat16 <-> float32 conversions: AVX-512 or F16C for float16 where the build
// enables them (16 or 8 lanes, then a scalar tail), integer loops the compiler vectorises for
// bfloat16. The scalar code in element_ops.h gives the same bits as the hardware paths.
#include "kernels/convert.h"

#include <cstdint>

#include "kernels/element_ops.h"
#include "kernels/loops.h"

#if defined(__F16C__) || defined(__AVX512F__)
// GCC 12's _mm512_cvtps_ph uses a self-initialised "undefined" vector, a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace braid::kernels::detail {

void halfToFloatN(float* out, const void* in, size_t n) {
  const auto* src = static_cast<const UA<uint16_t>*>(in);
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = halfBitsToFloat(src[i]);
}

void floatToHalfN(void* out, const float* in, size_t n) {
  auto* dst = static_cast<UA<uint16_t>*>(out);
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = floatToHalfBits(in[i]);
}

void bfloat16ToFloatN(float* __restrict out, const void* in, size_t n) {
  const auto* __restrict src = static_cast<const UA<uint16_t>*>(in);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) out[i] = bfloat16BitsToFloat(src[i]);
}

void floatToBfloat16N(void* out, const float* __restrict in, size_t n) {
  auto* __restrict dst = static_cast<UA<uint16_t>*>(out);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) dst[i] = floatToBfloat16Bits(in[i]);
}

}  // namespace braid::kernels::detail
