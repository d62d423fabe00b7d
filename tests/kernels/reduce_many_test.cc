// reduceMany(): 1..16 inputs accumulated left to right, for every dtype x op, with dst a
// separate buffer or srcs[0] (same bits either way), across chunk boundaries and unaligned.
#include <gtest/gtest.h>

#include <tuple>

#include "kernel_test_util.h"

namespace braid::kernels::test {
namespace {

class ReduceManyTest : public ::testing::TestWithParam<std::tuple<DataType, RedOp>> {
 protected:
  DataType type() const { return std::get<0>(GetParam()); }
  RedOp op() const { return std::get<1>(GetParam()); }
};

template <typename T>
void checkMany(DataType type, RedOp op, int nsrc, size_t count, size_t offset, uint64_t seed) {
  SCOPED_TRACE(std::string(dataTypeName(type)) + " " + redOpName(op) + " nsrc " +
               std::to_string(nsrc) + " count " + std::to_string(count) + " offset " +
               std::to_string(offset));
  const size_t bytes = count * storageSize<T>();
  std::mt19937_64 rng(seed);
  std::vector<GuardedBuffer> srcs;
  srcs.reserve(nsrc);
  std::vector<const void*> ptrs;
  for (int k = 0; k < nsrc; ++k) {
    srcs.emplace_back(bytes, offset);
    fillRandom<T>(rng, srcs.back().data(), count);
    ptrs.push_back(srcs.back().data());
  }
  // Reference: left to right in the compute type (float32 for the half types), rounded once.
  std::vector<unsigned char> want(bytes);
  for (size_t i = 0; i < count; ++i) {
    Acc<T> acc = load<T>(ptrs[0], i);
    for (int k = 1; k < nsrc; ++k) acc = refOp<Acc<T>>(op, acc, load<T>(ptrs[k], i));
    store<T>(want.data(), i, acc);
  }
  GuardedBuffer d(bytes, offset);
  fillRandom<T>(rng, d.data(), count);
  reduceMany(d.data(), ptrs.data(), nsrc, count, type, op);
  EXPECT_EQ(compareAll<T>(d.data(), want.data(), count), "") << "dst separate";
  EXPECT_TRUE(d.guardsIntact());

  // In place into srcs[0] must give the very same bits.
  reduceMany(srcs[0].data(), ptrs.data(), nsrc, count, type, op);
  EXPECT_EQ(std::memcmp(srcs[0].data(), d.data(), bytes), 0) << "dst == srcs[0] differs";
  for (auto& s : srcs) EXPECT_TRUE(s.guardsIntact());
}

TEST_P(ReduceManyTest, MatchesLeftToRightReference) {
  withType(type(), [&]<typename T>() {
    uint64_t seed = 1000;
    for (int nsrc = 1; nsrc <= 16; ++nsrc) {
      checkMany<T>(type(), op(), nsrc, 1023, 0, seed++);
      if (HasFailure()) return;
    }
    // Several 8 KiB chunks (and float16 staging blocks), unaligned, with a tail.
    for (int nsrc : {2, 3, 5, 16}) {
      checkMany<T>(type(), op(), nsrc, 20000 + 3, 1, seed++);
      checkMany<T>(type(), op(), nsrc, 17, storageSize<T>(), seed++);
      if (HasFailure()) return;
    }
    checkMany<T>(type(), op(), 4, 0, 0, seed++);
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceManyTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes),
                                            ::testing::ValuesIn(kAllOps)),
                         [](const auto& info) {
                           return paramName(std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(ReduceMany, DstAliasingALaterSourceStillCorrect) {
  // Outside the documented contract, but the kernel honours it: dst == srcs[2].
  constexpr size_t n = 5000;
  std::vector<int32_t> s0(n), s1(n), s2(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    s0[i] = static_cast<int32_t>(i * 7 + 1);
    s1[i] = static_cast<int32_t>(i * 3 + 5);
    s2[i] = static_cast<int32_t>(1000 - i);
    want[i] = s0[i] + s1[i] + s2[i];
  }
  const void* srcs[] = {s0.data(), s1.data(), s2.data()};
  reduceMany(s2.data(), srcs, 3, n, DataType::kInt32, RedOp::kSum);
  EXPECT_EQ(s2, want);
}

TEST(ReduceMany, HalfAccumulatesInFloatAndRoundsOnce) {
  // 2048 + 1 + 1 in float16 one step at a time is 2048 (each +1 is a tie to even); accumulated
  // in float32 and rounded once it is 2050.
  const uint16_t big = floatToHalf(2048.0f), one = floatToHalf(1.0f);
  const uint16_t a[] = {big}, b[] = {one}, c[] = {one};
  const void* srcs[] = {a, b, c};
  uint16_t out = 0;
  reduceMany(&out, srcs, 3, 1, DataType::kFloat16, RedOp::kSum);
  EXPECT_EQ(halfToFloat(out), 2050.0f);
}

}  // namespace
}  // namespace braid::kernels::test
