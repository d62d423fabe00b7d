// float16/bfloat16 conversions: exhaustive over all 65536 bit patterns (values, round trips,
// NaN, inf, subnormals, round-to-nearest-even at every tie), and the bulk (F16C/AVX-512)
// conversions against the scalar ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/convert.h"
#include "kernels/kernels.h"

namespace braid::kernels {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool isHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool isBf16Nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(Half, DecodesEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    const float got = halfToFloat(static_cast<uint16_t>(h));
    const bool neg = (h & 0x8000) != 0;
    ASSERT_EQ(std::signbit(got), neg) << std::hex << h;
    if (e == 31) {
      if (m == 0) {
        ASSERT_TRUE(std::isinf(got)) << std::hex << h;
      } else {
        ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      }
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    ASSERT_EQ(static_cast<double>(got), neg ? -mag : mag) << std::hex << h;
  }
}

TEST(Half, RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    if (isHalfNan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(isHalfNan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Half, RoundsToNearestEvenAtEveryTie) {
  // Every pair of adjacent positive finite halves, subnormals included: the midpoint goes to
  // the even one, one float ulp either side goes to the nearer one; negatives mirror.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float lo = halfToFloat(static_cast<uint16_t>(h));
    const float hi = halfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact: 12 significant bits
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(floatToHalf(mid), even) << std::hex << h;
    ASSERT_EQ(floatToHalf(-mid), even | 0x8000) << std::hex << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
  }
  // Past the largest half (65504): 65520 is the tie with 2^16, which rounds (to even) to inf.
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(floatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_TRUE(isHalfNan(floatToHalf(NAN)));
  // Below half the smallest subnormal (2^-25, itself a tie to 0) everything is a signed zero.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 1);
  EXPECT_EQ(floatToHalf(-1e-30f), 0x8000);
  EXPECT_EQ(floatToHalf(floatOf(1)), 0);  // float32 subnormal
}

TEST(BFloat16, DecodesAndRoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    if (isBf16Nan(static_cast<uint16_t>(b))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      const uint16_t back = floatToBfloat16(f);
      ASSERT_TRUE(isBf16Nan(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(bitsOf(f), b << 16) << std::hex << b;
      ASSERT_EQ(floatToBfloat16(f), b) << std::hex << b;
    }
  }
}

TEST(BFloat16, RoundsToNearestEvenAtEveryTie) {
  for (uint32_t b = 0; b < 0x7f7f; ++b) {
    const float lo = bfloat16ToFloat(static_cast<uint16_t>(b));
    const float hi = bfloat16ToFloat(static_cast<uint16_t>(b + 1));
    const float mid = floatOf((b << 16) | 0x8000);  // halfway, subnormals included
    ASSERT_TRUE(mid > lo && mid < hi) << std::hex << b;
    const uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    ASSERT_EQ(floatToBfloat16(mid), even) << std::hex << b;
    ASSERT_EQ(floatToBfloat16(-mid), even | 0x8000) << std::hex << b;
    ASSERT_EQ(floatToBfloat16(std::nextafter(mid, 0.0f)), b) << std::hex << b;
    ASSERT_EQ(floatToBfloat16(std::nextafter(mid, INFINITY)), b + 1) << std::hex << b;
  }
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f8000)), 0x7f80);  // tie above the largest: inf
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(floatToBfloat16(INFINITY), 0x7f80);
  EXPECT_TRUE(isBf16Nan(floatToBfloat16(floatOf(0x7f800001))));  // payload only in low bits
  EXPECT_TRUE(isBf16Nan(floatToBfloat16(floatOf(0xffc00000))));
}

/// Float inputs that stress the conversions: random bit patterns plus the special values and
/// ties around them.
std::vector<float> stressFloats(size_t n) {
  std::mt19937_64 rng(5);
  std::vector<float> v;
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                           0x7f800001u, 0xffffffffu, 0x477ff000u, 0x477fefffu, 0x33000000u,
                           0x33000001u, 0x387fc000u, 0x00000001u, 0x7f7f8000u}) {
    v.push_back(floatOf(special));
  }
  while (v.size() < n) {
    const uint64_t r = rng();
    v.push_back(floatOf(static_cast<uint32_t>(r)));
    // Values in the half range with random low bits, where rounding matters most.
    v.push_back(floatOf(0x33000000u + static_cast<uint32_t>((r >> 32) % 0x14800000u)));
  }
  return v;
}

TEST(BulkConvert, MatchesScalarForHalf) {
  // All 65536 halves, at an odd byte address, with a count that leaves a vector tail.
  std::vector<unsigned char> raw(2 * 65536 + 1);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    std::memcpy(raw.data() + 1 + 2 * h, &v, 2);
  }
  std::vector<float> f(65536);
  detail::halfToFloatN(f.data(), raw.data() + 1, 65536 - 3);
  for (uint32_t h = 0; h < 65536 - 3; ++h) {
    ASSERT_EQ(bitsOf(f[h]), bitsOf(halfToFloat(static_cast<uint16_t>(h)))) << std::hex << h;
  }
  const std::vector<float> in = stressFloats(1 << 20);
  std::vector<unsigned char> out(2 * in.size() + 1);
  detail::floatToHalfN(out.data() + 1, in.data(), in.size() - 1);
  for (size_t i = 0; i + 1 < in.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, out.data() + 1 + 2 * i, 2);
    ASSERT_EQ(got, floatToHalf(in[i])) << std::hex << bitsOf(in[i]);
  }
}

TEST(BulkConvert, MatchesScalarForBFloat16) {
  std::vector<unsigned char> raw(2 * 65536 + 1);
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t v = static_cast<uint16_t>(b);
    std::memcpy(raw.data() + 1 + 2 * b, &v, 2);
  }
  std::vector<float> f(65536);
  detail::bfloat16ToFloatN(f.data(), raw.data() + 1, 65536 - 3);
  for (uint32_t b = 0; b < 65536 - 3; ++b) {
    ASSERT_EQ(bitsOf(f[b]), bitsOf(bfloat16ToFloat(static_cast<uint16_t>(b)))) << std::hex << b;
  }
  const std::vector<float> in = stressFloats(1 << 20);
  std::vector<unsigned char> out(2 * in.size() + 1);
  detail::floatToBfloat16N(out.data() + 1, in.data(), in.size() - 1);
  for (size_t i = 0; i + 1 < in.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, out.data() + 1 + 2 * i, 2);
    ASSERT_EQ(got, floatToBfloat16(in[i])) << std::hex << bitsOf(in[i]);
  }
}

}  // namespace
}  // namespace braid::kernels
