// copy(): byte-exact for small and large (streaming-store) sizes at any alignment, no writes
// outside the range.
#include <gtest/gtest.h>

#include <random>

#include "kernel_test_util.h"

namespace braid::kernels::test {
namespace {

TEST(Copy, ByteExactAtAnyAlignment) {
  std::mt19937_64 rng(3);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{4097},
                       size_t{(17u << 20) + 5}}) {
    for (size_t srcOff : {0, 1}) {
      for (size_t dstOff : {0, 3}) {
        SCOPED_TRACE(std::to_string(bytes) + " bytes, offsets " + std::to_string(srcOff) + "/" +
                     std::to_string(dstOff));
        GuardedBuffer src(bytes, srcOff), dst(bytes, dstOff);
        fillRandom<uint64_t>(rng, src.data(), bytes / 8);
        for (size_t i = bytes / 8 * 8; i < bytes; ++i)
          src.data()[i] = static_cast<unsigned char>(i);
        copy(dst.data(), src.data(), bytes);
        EXPECT_EQ(std::memcmp(dst.data(), src.data(), bytes), 0);
        EXPECT_TRUE(dst.guardsIntact() && src.guardsIntact());
      }
    }
  }
  unsigned char same[5] = {1, 2, 3, 4, 5};
  copy(same, same, 5);  // dst == src is a no-op
  EXPECT_EQ(same[4], 5);
}

}  // namespace
}  // namespace braid::kernels::test

// copyStreaming at every small size and misalignment (the head/tail edges of the streamed lines).
TEST(CopyStreaming, SmallAndMisalignedSizesCopyExactly) {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t offset = 0; offset < 64; offset += 7) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{12}, size_t{63}, size_t{64}, size_t{65},
                         size_t{127}, size_t{128}, size_t{1000}, size_t{4000}}) {
      std::fill(dst.begin(), dst.end(), 0xEE);
      braid::kernels::copyStreaming(dst.data() + offset, src.data() + 3, bytes);
      for (size_t i = 0; i < dst.size(); ++i) {
        unsigned char want = (i >= offset && i < offset + bytes) ? src[3 + i - offset] : 0xEE;
        ASSERT_EQ(dst[i], want) << "offset " << offset << " bytes " << bytes << " at " << i;
      }
    }
  }
}
