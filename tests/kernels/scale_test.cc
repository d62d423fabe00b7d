// scale(): the NCCL API's PreMulSum scaling, per type: floats through double (the 16-bit ones
// through float32), integers as their type's wrapping product with the scalar clamped to the
// type's range; in place and out of place.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace braid::kernels {
namespace {

template <typename T>
std::vector<T> scaled(std::vector<T> in, DataType type, double scalar, bool inPlace) {
  std::vector<T> out(in.size());
  if (inPlace) {
    scale(in.data(), in.data(), in.size(), type, scalar);
    return in;
  }
  scale(out.data(), in.data(), in.size(), type, scalar);
  return out;
}

TEST(Scale, EveryKindOfType) {
  for (bool inPlace : {false, true}) {
    EXPECT_EQ(scaled<float>({1.5f, -2.0f, 3.0f}, DataType::kFloat32, 0.5, inPlace),
              (std::vector<float>{0.75f, -1.0f, 1.5f}));
    EXPECT_EQ(scaled<double>({1e300, -0.5}, DataType::kFloat64, 4.0, inPlace),
              (std::vector<double>{4e300, -2.0}));
    // int32: wraps like a product in the type.
    EXPECT_EQ(scaled<int32_t>({7, -7, std::numeric_limits<int32_t>::max()}, DataType::kInt32, 3.0,
                              inPlace),
              (std::vector<int32_t>{21, -21, 2147483645}));
    EXPECT_EQ(scaled<uint8_t>({200, 2}, DataType::kUint8, 2.0, inPlace),
              (std::vector<uint8_t>{144, 4}));
    EXPECT_EQ(scaled<int8_t>({-128, 5}, DataType::kInt8, -1.0, inPlace),
              (std::vector<int8_t>{-128, -5}));
    // A scalar beyond the type's range is clamped to it: 2 * 255.
    EXPECT_EQ(scaled<uint8_t>({2}, DataType::kUint8, 1000.0, inPlace),
              (std::vector<uint8_t>{254}));
    EXPECT_EQ(scaled<uint16_t>({floatToHalfBits(1.5f)}, DataType::kFloat16, 0.5, inPlace),
              (std::vector<uint16_t>{floatToHalfBits(0.75f)}));
    EXPECT_EQ(scaled<uint16_t>({floatToBfloat16Bits(3.0f)}, DataType::kBFloat16, -1.25, inPlace),
              (std::vector<uint16_t>{floatToBfloat16Bits(-3.75f)}));
  }
  scale(nullptr, nullptr, 0, DataType::kFloat32, 2.0);  // nothing to do, nothing touched
}

}  // namespace
}  // namespace braid::kernels
