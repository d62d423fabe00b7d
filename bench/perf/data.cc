#include "bench/perf/data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/element_ops.h"

namespace braid::bench {
namespace {

// Storage tags for the two 16-bit float types (both held in uint16_t).
struct Half {};
struct BFloat16 {};

template <typename T>
struct Storage {
  using type = T;
};
template <>
struct Storage<Half> {
  using type = uint16_t;
};
template <>
struct Storage<BFloat16> {
  using type = uint16_t;
};

template <typename T>
void store(void* buf, size_t i, double value) {
  typename Storage<T>::type out;
  if constexpr (std::is_same_v<T, Half>) {
    out = floatToHalfBits(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    out = floatToBfloat16Bits(static_cast<float>(value));
  } else if constexpr (std::is_integral_v<T>) {
    // Through uint64 so an out-of-range product wraps as two's complement, like the kernels.
    out = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(value)));
  } else {
    out = static_cast<T>(value);
  }
  std::memcpy(static_cast<char*>(buf) + i * sizeof(out), &out, sizeof(out));
}

template <typename T>
double load(const void* buf, size_t i) {
  typename Storage<T>::type in;
  std::memcpy(&in, static_cast<const char*>(buf) + i * sizeof(in), sizeof(in));
  if constexpr (std::is_same_v<T, Half>) {
    return halfBitsToFloat(in);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bfloat16BitsToFloat(in);
  } else {
    return static_cast<double>(in);
  }
}

/// Calls f(T{}) with the storage tag of `type` (Half and BFloat16 above for the 16-bit floats).
template <typename F>
auto withType(DataType type, F&& f) {
  BRAID_ENFORCE(isValid(type), ErrorCode::kInvalidUsage, "bench: unknown data type {}",
                static_cast<int>(type));
  return visitDataType<Half, BFloat16>(type, std::forward<F>(f));
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  return x;
}

/// op-fold of every rank's input at `index`, in exact integer arithmetic.
int64_t reduceExact(uint64_t index, uint64_t seed, RedOp op, int nranks) {
  int64_t acc = inputValue(0, index, seed, op, nranks);
  for (int q = 1; q < nranks; ++q) {
    acc = kernels::applyOp(op, acc, inputValue(q, index, seed, op, nranks));
  }
  return acc;
}

/// The value a correct reduction leaves in a `T` element, as a double.
template <typename T>
double finalValue(int64_t exact, RedOp op, int nranks) {
  double value = static_cast<double>(exact);
  if (op == RedOp::kAvg) {
    // Sum, then one division in the type's own precision (half types through float32).
    if constexpr (std::is_integral_v<T>) {
      value = static_cast<double>(exact / nranks);
    } else if constexpr (std::is_same_v<T, double>) {
      value = static_cast<double>(exact) / nranks;
    } else {
      value = static_cast<float>(exact) / static_cast<float>(nranks);
    }
  }
  typename Storage<T>::type cell;
  store<T>(&cell, 0, value);
  return load<T>(&cell, 0);
}

/// Relative tolerance: exact everywhere except avg on floats, where a division by the rank count
/// may be done as a multiplication by its reciprocal (one rounding either way).
template <typename T>
double tolerance(RedOp op) {
  if (op != RedOp::kAvg) return 0;
  if constexpr (std::is_same_v<T, Half>) return 2e-3;
  if constexpr (std::is_same_v<T, BFloat16>) return 1.6e-2;
  if constexpr (std::is_same_v<T, float>) return 1e-6;
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  return 0;
}

bool matches(double got, double expected, double tol) {
  if (tol == 0) return got == expected;
  return std::fabs(got - expected) <= tol * std::max(1.0, std::fabs(expected));
}

template <typename T>
int64_t countWrongTyped(const CheckSpec& s, const void* recv) {
  const Counts& c = s.counts;
  const RedOp op = s.coll->hasOp ? s.op : RedOp::kSum;
  const double tol = tolerance<T>(op);
  int64_t wrong = 0;
  auto reduced = [&](uint64_t index) {
    return finalValue<T>(reduceExact(index, s.seed, op, s.nranks), op, s.nranks);
  };
  switch (s.coll->kind) {
    case Collective::kReduce:
      if (s.rank != s.root) return 0;
      [[fallthrough]];
    case Collective::kAllReduce:
      for (size_t i = 0; i < c.paramCount; ++i)
        wrong += !matches(load<T>(recv, i), reduced(i), tol);
      break;
    case Collective::kReduceScatter: {
      uint64_t base = static_cast<uint64_t>(s.rank) * c.recvCount;
      for (size_t i = 0; i < c.recvCount; ++i) {
        wrong += !matches(load<T>(recv, i), reduced(base + i), tol);
      }
      break;
    }
    case Collective::kGather:
      if (s.rank != s.root) return 0;
      [[fallthrough]];
    case Collective::kAllGather:
      for (size_t j = 0; j < c.recvCount; ++j) {
        int q = static_cast<int>(j / c.sendCount);
        double expected = finalValue<T>(inputValue(q, j % c.sendCount, s.seed, op, s.nranks),
                                        RedOp::kSum, s.nranks);
        wrong += load<T>(recv, j) != expected;
      }
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < c.recvCount; ++i) {
        double expected =
            finalValue<T>(inputValue(s.root, i, s.seed, op, s.nranks), RedOp::kSum, s.nranks);
        wrong += load<T>(recv, i) != expected;
      }
      break;
    case Collective::kAllToAll:  // block q: rank q's block for this rank
      for (size_t j = 0; j < c.recvCount; ++j) {
        const int q = static_cast<int>(j / c.paramCount);
        const uint64_t at = uint64_t(s.rank) * c.paramCount + j % c.paramCount;
        wrong += load<T>(recv, j) !=
                 finalValue<T>(inputValue(q, at, s.seed, op, s.nranks), RedOp::kSum, s.nranks);
      }
      break;
    case Collective::kScatter:  // the root's block for this rank
      for (size_t i = 0; i < c.recvCount; ++i) {
        const uint64_t at = uint64_t(s.rank) * c.recvCount + i;
        wrong += load<T>(recv, i) !=
                 finalValue<T>(inputValue(s.root, at, s.seed, op, s.nranks), RedOp::kSum, s.nranks);
      }
      break;
    default:
      fail(ErrorCode::kInvalidUsage, "bench: no check for collective {}",
           static_cast<int>(s.coll->kind));
  }
  return wrong;
}

}  // namespace

int64_t inputValue(int rank, uint64_t index, uint64_t seed, RedOp op, int nranks) {
  uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull ^ mix(index + 1) ^
                   (static_cast<uint64_t>(rank) + 1) * 0xc2b2ae3d27d4eb4full);
  if (op == RedOp::kProd) {
    // 2 on at most ceil(nranks / 4) ranks per element, so a product is at most 2^14 (<= 56
    // ranks); beyond that on exactly one rank.
    if (nranks > 56) return static_cast<uint64_t>(rank) == mix(index ^ seed) % nranks ? 2 : 1;
    return (static_cast<uint64_t>(rank) + mix(index ^ seed)) % 4 == 0 ? 2 : 1;
  }
  // Values below 128 / nranks (at most 16): every sum fits int8 and is exact in bfloat16.
  int64_t range = std::clamp<int64_t>(128 / std::max(nranks, 1), 1, 16);
  return static_cast<int64_t>(h % static_cast<uint64_t>(range));
}

void fillInput(void* buf, DataType type, size_t count, int rank, uint64_t indexBase, uint64_t seed,
               RedOp op, int nranks) {
  withType(type, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) {
      store<T>(buf, i, static_cast<double>(inputValue(rank, indexBase + i, seed, op, nranks)));
    }
  });
}

void fillPoison(void* buf, DataType type, size_t count) {
  // 0xff bytes: NaN for the float types, -1 / max for the integers; inputs are never negative.
  std::memset(buf, 0xff, count * dataTypeSize(type));
}

void fillSend(const CheckSpec& spec, void* send) {
  const RedOp op = spec.coll->hasOp ? spec.op : RedOp::kSum;
  fillInput(send, spec.type, spec.counts.sendCount, spec.rank, 0, spec.seed, op, spec.nranks);
}

int64_t countWrong(const CheckSpec& spec, const void* recv) {
  if (spec.counts.paramCount == 0) return 0;
  return withType(spec.type, [&](auto tag) { return countWrongTyped<decltype(tag)>(spec, recv); });
}

uint16_t floatToHalfBits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity (>= 65520)
  if (absx < 0x38800000u) {
    // Subnormal half: a multiple of 2^-24; the scaling is exact, nearbyint rounds to even.
    float a;
    std::memcpy(&a, &absx, sizeof(a));
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t h = (((absx >> 23) - 112) << 10) | ((absx >> 13) & 0x3ffu);
  const uint32_t rest = absx & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | h);
}

float halfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, sizeof(f));
  return f;
}

uint16_t floatToBfloat16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16BitsToFloat(uint16_t bits) {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

}  // namespace braid::bench
