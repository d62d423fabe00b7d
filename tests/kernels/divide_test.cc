// divide(): integer truncation toward zero (negatives, divisors beyond the type's range) and
// float division in the type's own precision.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace braid::kernels::test {
namespace {

constexpr uint64_t kDivisors[] = {1,          2,          3,    7,     8,          100,
                                  200,        255,        256,  65537, 1ull << 31, (1ull << 32) + 1,
                                  1ull << 62, 1ull << 63, ~0ull};

template <typename T>
Acc<T> refDivide(Acc<T> x, uint64_t divisor) {
  if constexpr (std::is_integral_v<T>) {
    // __int128 holds every value and divisor; C++ division truncates toward zero.
    return static_cast<T>(static_cast<__int128>(x) / static_cast<__int128>(divisor));
  } else {
    const Acc<T> q = static_cast<Acc<T>>(divisor);
    return x / q;
  }
}

class DivideTest : public ::testing::TestWithParam<DataType> {};

TEST_P(DivideTest, MatchesReference) {
  const DataType type = GetParam();
  withType(type, [&]<typename T>() {
    std::mt19937_64 rng(77);
    for (size_t count : {size_t{1}, size_t{7}, size_t{17}, size_t{1023}, size_t{5000}}) {
      for (uint64_t divisor : kDivisors) {
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(dataTypeName(type)) + " count " + std::to_string(count) +
                       " divisor " + std::to_string(divisor) + (inPlace ? " in place" : ""));
          const size_t bytes = count * storageSize<T>();
          GuardedBuffer src(bytes, 1), dst(bytes, storageSize<T>());
          fillRandom<T>(rng, src.data(), count);
          if constexpr (std::is_signed_v<T>) {
            // The extremes: the minimum (its own negation overflows) and -1.
            store<T>(src.data(), 0, std::numeric_limits<T>::min());
            if (count > 1) store<T>(src.data(), 1, T(-1));
          }
          std::vector<unsigned char> want(bytes);
          for (size_t i = 0; i < count; ++i) {
            store<T>(want.data(), i, refDivide<T>(load<T>(src.data(), i), divisor));
          }
          void* out = inPlace ? src.data() : dst.data();
          divide(out, src.data(), count, type, divisor);
          EXPECT_EQ(compareAll<T>(out, want.data(), count), "");
          EXPECT_TRUE(src.guardsIntact() && dst.guardsIntact());
          if (HasFailure()) return;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DivideTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(dataTypeName(info.param)); });

TEST(Divide, IntegerTruncatesTowardZero) {
  const int32_t src[] = {7, -7, 6, -6, 5, -5, 1, -1, 0, INT32_MIN, INT32_MAX};
  const int32_t want[] = {2, -2, 2, -2, 1, -1, 0, 0, 0, INT32_MIN / 3, INT32_MAX / 3};
  int32_t out[std::size(src)];
  divide(out, src, std::size(src), DataType::kInt32, 3);
  for (size_t i = 0; i < std::size(src); ++i) EXPECT_EQ(out[i], want[i]) << i;

  const int64_t big[] = {INT64_MIN, INT64_MAX, -1};
  int64_t out64[3];
  divide(out64, big, 3, DataType::kInt64, 1ull << 63);
  EXPECT_EQ(out64[0], -1);
  EXPECT_EQ(out64[1], 0);
  EXPECT_EQ(out64[2], 0);
  const int8_t small[] = {-128, 127, -100};
  int8_t out8[3];
  divide(out8, small, 3, DataType::kInt8, 100);
  EXPECT_EQ(out8[0], -1);
  EXPECT_EQ(out8[1], 1);
  EXPECT_EQ(out8[2], -1);
}

TEST(Divide, FloatsDivideInTheirOwnPrecision) {
  const float f[] = {1.0f, -3.0f, 10.0f};
  float fo[3];
  divide(fo, f, 3, DataType::kFloat32, 3);
  EXPECT_EQ(fo[0], 1.0f / 3.0f);
  EXPECT_EQ(fo[1], -1.0f);
  EXPECT_EQ(fo[2], 10.0f / 3.0f);
  const double d[] = {1.0, -3.0};
  double dout[2];
  divide(dout, d, 2, DataType::kFloat64, 3);
  EXPECT_EQ(dout[0], 1.0 / 3.0);
  EXPECT_EQ(dout[1], -1.0);
  const uint16_t h[] = {floatToHalf(1.0f), floatToBfloat16(1.0f)};
  uint16_t ho[2];
  divide(&ho[0], &h[0], 1, DataType::kFloat16, 3);
  divide(&ho[1], &h[1], 1, DataType::kBFloat16, 3);
  EXPECT_EQ(ho[0], floatToHalf(1.0f / 3.0f));
  EXPECT_EQ(ho[1], floatToBfloat16(1.0f / 3.0f));
}

}  // namespace
}  // namespace braid::kernels::test
