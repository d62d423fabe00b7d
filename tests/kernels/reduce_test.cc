// reduce() and reduceCopy(): every dtype x op against the reference, over counts that hit the
// vector tails, unaligned pointers and the allowed aliasing.
#include <gtest/gtest.h>

#include <tuple>

#include "kernel_test_util.h"

namespace braid::kernels::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 2, 7, 15, 16, 17, 1023, (1u << 20) + 3};
constexpr size_t kLarge = (1u << 20) + 3;

enum class Alias { kNone, kDstIsA, kDstIsB, kAll };

const char* aliasName(Alias a) {
  switch (a) {
    case Alias::kNone:
      return "none";
    case Alias::kDstIsA:
      return "dst==a";
    case Alias::kDstIsB:
      return "dst==b";
    case Alias::kAll:
      return "dst==a==b";
  }
  return "?";
}

class ReduceTest : public ::testing::TestWithParam<std::tuple<DataType, RedOp>> {
 protected:
  DataType type() const { return std::get<0>(GetParam()); }
  RedOp op() const { return std::get<1>(GetParam()); }
};

/// Byte offsets to test: aligned, one element, and one byte where that differs.
std::vector<size_t> offsetsFor(size_t elemSize) {
  std::vector<size_t> v = {0, elemSize};
  if (elemSize > 1) v.push_back(1);
  return v;
}

template <typename T>
void checkReduce(DataType type, RedOp op, size_t count, size_t offset, Alias alias, uint64_t seed) {
  SCOPED_TRACE(std::string(dataTypeName(type)) + " " + redOpName(op) + " count " +
               std::to_string(count) + " offset " + std::to_string(offset) + " " +
               aliasName(alias));
  const size_t bytes = count * storageSize<T>();
  std::mt19937_64 rng(seed);
  GuardedBuffer a(bytes, offset), b(bytes, offset), d(bytes, offset);
  fillRandom<T>(rng, a.data(), count);
  fillRandom<T>(rng, b.data(), count);
  fillRandom<T>(rng, d.data(), count);  // garbage the kernel must overwrite
  if (alias == Alias::kAll) std::memcpy(b.data(), a.data(), bytes);

  std::vector<unsigned char> want(bytes);
  for (size_t i = 0; i < count; ++i) {
    store<T>(want.data(), i, refOp<Acc<T>>(op, load<T>(a.data(), i), load<T>(b.data(), i)));
  }
  void* dst = d.data();
  const void* pa = a.data();
  const void* pb = b.data();
  switch (alias) {
    case Alias::kNone:
      break;
    case Alias::kDstIsA:
      dst = a.data();
      break;
    case Alias::kDstIsB:
      dst = b.data();
      break;
    case Alias::kAll:
      dst = a.data();
      pb = a.data();
      break;
  }
  reduce(dst, pa, pb, count, type, op);
  EXPECT_EQ(compareAll<T>(dst, want.data(), count), "");
  EXPECT_TRUE(a.guardsIntact() && b.guardsIntact() && d.guardsIntact());
}

TEST_P(ReduceTest, MatchesReference) {
  withType(type(), [&]<typename T>() {
    uint64_t seed = 1;
    for (size_t count : kCounts) {
      for (size_t off : offsetsFor(storageSize<T>())) {
        for (Alias alias : {Alias::kNone, Alias::kDstIsA, Alias::kDstIsB, Alias::kAll}) {
          // Keep the 1M case to three combinations so the suite stays fast.
          if (count == kLarge &&
              !((off == 0 && alias == Alias::kNone) || (off == 1 && alias == Alias::kDstIsA) ||
                (off == storageSize<T>() && alias == Alias::kDstIsB))) {
            continue;
          }
          checkReduce<T>(type(), op(), count, off, alias, seed++);
          if (HasFailure()) return;
        }
      }
    }
  });
}

TEST_P(ReduceTest, ReduceCopyWritesBothOutputs) {
  withType(type(), [&]<typename T>() {
    uint64_t seed = 100;
    for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{1023}, size_t{20000 + 3}}) {
      // 0: distinct outputs; 1: dst0 == a, dst1 == b; 2: dst0 == b, dst1 == a; 3: dst0 == dst1.
      for (int aliasing = 0; aliasing < 4; ++aliasing) {
        SCOPED_TRACE("count " + std::to_string(count) + " aliasing " + std::to_string(aliasing));
        const size_t bytes = count * storageSize<T>();
        std::mt19937_64 rng(seed++);
        const size_t off = aliasing == 0 ? 1 : 0;
        GuardedBuffer a(bytes, off), b(bytes, off), d0(bytes, off), d1(bytes, 0);
        fillRandom<T>(rng, a.data(), count);
        fillRandom<T>(rng, b.data(), count);
        fillRandom<T>(rng, d0.data(), count);
        fillRandom<T>(rng, d1.data(), count);
        std::vector<unsigned char> want(bytes);
        for (size_t i = 0; i < count; ++i) {
          store<T>(want.data(), i, refOp<Acc<T>>(op(), load<T>(a.data(), i), load<T>(b.data(), i)));
        }
        void* out0 = d0.data();
        void* out1 = d1.data();
        if (aliasing == 1) out0 = a.data(), out1 = b.data();
        if (aliasing == 2) out0 = b.data(), out1 = a.data();
        if (aliasing == 3) out1 = out0;
        reduceCopy(out0, out1, a.data(), b.data(), count, type(), op());
        EXPECT_EQ(compareAll<T>(out0, want.data(), count), "");
        EXPECT_EQ(compareAll<T>(out1, want.data(), count), "");
        EXPECT_TRUE(a.guardsIntact() && b.guardsIntact() && d0.guardsIntact() && d1.guardsIntact());
        if (HasFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes),
                                            ::testing::ValuesIn(kAllOps)),
                         [](const auto& info) {
                           return paramName(std::get<0>(info.param), std::get<1>(info.param));
                         });

/// NaN and inf behave as documented in element_ops.h for every float type.
template <typename T>
void checkSpecials(DataType type) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float as[] = {nan, 1.0f, nan, inf, -inf, inf, 2.0f};
  const float bs[] = {1.0f, nan, nan, 1.0f, 1.0f, -inf, inf};
  constexpr size_t n = std::size(as);
  std::vector<unsigned char> a(n * storageSize<T>()), b(a.size()), d(a.size());
  for (size_t i = 0; i < n; ++i) {
    store<T>(a.data(), i, static_cast<Acc<T>>(as[i]));
    store<T>(b.data(), i, static_cast<Acc<T>>(bs[i]));
  }
  for (RedOp op : kAllOps) {
    reduce(d.data(), a.data(), b.data(), n, type, op);
    for (size_t i = 0; i < n; ++i) {
      const double got = load<T>(d.data(), i);
      const double x = as[i], y = bs[i];
      if (std::isnan(x) || std::isnan(y)) {
        EXPECT_TRUE(std::isnan(got)) << redOpName(op) << " element " << i;
      } else {
        const double want = refOp<double>(op, x, y);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << redOpName(op) << " element " << i;
        } else {
          EXPECT_EQ(got, want) << redOpName(op) << " element " << i;
        }
      }
    }
  }
}

TEST(ReduceSpecials, NanPropagatesAndInfinityBehaves) {
  checkSpecials<float>(DataType::kFloat32);
  checkSpecials<double>(DataType::kFloat64);
  checkSpecials<Half>(DataType::kFloat16);
  checkSpecials<BFloat16>(DataType::kBFloat16);
}

TEST(ReduceSpecials, AvgIsSum) {
  std::mt19937_64 rng(7);
  for (DataType t : kAllTypes) {
    withType(t, [&]<typename T>() {
      constexpr size_t n = 333;
      std::vector<unsigned char> a(n * storageSize<T>()), b(a.size()), s(a.size()), v(a.size());
      fillRandom<T>(rng, a.data(), n);
      fillRandom<T>(rng, b.data(), n);
      reduce(s.data(), a.data(), b.data(), n, t, RedOp::kSum);
      reduce(v.data(), a.data(), b.data(), n, t, RedOp::kAvg);
      EXPECT_EQ(s, v) << dataTypeName(t);
    });
  }
}

TEST(ReduceErrors, InvalidTypeOrOpThrows) {
  float a[4] = {1, 2, 3, 4}, d[4];
  EXPECT_THROW(reduce(d, a, a, 4, static_cast<DataType>(42), RedOp::kSum), std::invalid_argument);
  EXPECT_THROW(reduce(d, a, a, 4, DataType::kFloat32, static_cast<RedOp>(9)),
               std::invalid_argument);
  EXPECT_THROW(reduceCopy(d, d, a, a, 0, static_cast<DataType>(42), RedOp::kSum),
               std::invalid_argument);
  const void* srcs[] = {a};
  EXPECT_THROW(reduceMany(d, srcs, 0, 4, DataType::kFloat32, RedOp::kSum), std::invalid_argument);
  EXPECT_THROW(divide(d, a, 4, DataType::kFloat32, 0), std::invalid_argument);
}

}  // namespace
}  // namespace braid::kernels::test
