// Test helpers for kernels/: per-dtype element access, seeded random inputs and an independent
// reference (exact integer arithmetic; float64 for float32/float64; float32-then-round for the
// half types).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/types.hpp"
#include "kernels/kernels.h"

namespace braid {
// Readable parameter names in gtest output.
inline void PrintTo(DataType t, std::ostream* os) { *os << dataTypeName(t); }
inline void PrintTo(RedOp op, std::ostream* os) { *os << redOpName(op); }
}  // namespace braid

namespace braid::kernels::test {

/// Storage tags for the two 16-bit float types.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <typename T>
constexpr bool kIsHalfType = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// The type the reference computes in: T itself, float for the half types.
template <typename T>
using Acc = std::conditional_t<kIsHalfType<T>, float, T>;

constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                  DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                  DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                  DataType::kBFloat16};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

/// Calls f.template operator()<T>() with the storage type of `type` (Half, BFloat16 above).
template <typename F>
void withType(DataType type, F&& f) {
  ASSERT_TRUE(isValid(type)) << "bad dtype";
  visitDataType<Half, BFloat16>(type, [&](auto tag) { f.template operator()<decltype(tag)>(); });
}

/// Element i of a buffer with any alignment, in the reference's compute type.
template <typename T>
Acc<T> load(const void* p, size_t i) {
  if constexpr (kIsHalfType<T>) {
    uint16_t b;
    std::memcpy(&b, static_cast<const char*>(p) + 2 * i, 2);
    return std::is_same_v<T, Half> ? halfToFloat(b) : bfloat16ToFloat(b);
  } else {
    T v;
    std::memcpy(&v, static_cast<const char*>(p) + sizeof(T) * i, sizeof(T));
    return v;
  }
}

/// Stores v (rounded to nearest even for the half types) as element i.
template <typename T>
void store(void* p, size_t i, Acc<T> v) {
  if constexpr (kIsHalfType<T>) {
    const uint16_t b = std::is_same_v<T, Half> ? floatToHalf(v) : floatToBfloat16(v);
    std::memcpy(static_cast<char*>(p) + 2 * i, &b, 2);
  } else {
    std::memcpy(static_cast<char*>(p) + sizeof(T) * i, &v, sizeof(T));
  }
}

/// The reference a op b. Integers wrap via 64-bit unsigned arithmetic; float32 is computed in
/// float64 and rounded once (exact for one + or *); float64 is the operation itself. Float
/// max/min propagate NaN (first operand's when both) and return b on ties.
template <typename C>
C refOp(RedOp op, C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      case RedOp::kProd:
        return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      case RedOp::kMax:
        return a > b ? a : b;
      case RedOp::kMin:
        return a < b ? a : b;
    }
  } else {
    if (op == RedOp::kMax || op == RedOp::kMin) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return op == RedOp::kMax ? (a > b ? a : b) : (a < b ? a : b);
    }
    const double x = a, y = b;
    return static_cast<C>(op == RedOp::kProd ? x * y : x + y);
  }
  return C{};
}

/// Fills count elements with seeded random values that exercise the type: full-range integers,
/// floats of mixed sign and magnitude (and half subnormals); never all zeros.
template <typename T>
void fillRandom(std::mt19937_64& rng, void* p, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    if constexpr (std::is_integral_v<T>) {
      store<T>(p, i, static_cast<T>(r));
    } else {
      // Built from bits: random sign and mantissa, exponent in [lo, hi].
      int lo = -10, hi = 10;
      if constexpr (std::is_same_v<T, Half>) lo = -20, hi = 6;  // some half subnormals
      if constexpr (std::is_same_v<T, BFloat16>) lo = -30, hi = 30;
      const int e = lo + static_cast<int>((r >> 40) % static_cast<uint64_t>(hi - lo + 1));
      const uint64_t sign = r >> 63;
      if constexpr (std::is_same_v<T, double>) {
        const uint64_t bits = (sign << 63) | (static_cast<uint64_t>(1023 + e) << 52) |
                              ((r * 0x9E3779B97F4A7C15ull) >> 12);
        double v;
        std::memcpy(&v, &bits, 8);
        store<T>(p, i, v);
      } else {
        // Half and bfloat16 keep only the top mantissa bits, so the value is exact in them.
        uint32_t mant = static_cast<uint32_t>(r) & 0x7fffffu;
        if constexpr (std::is_same_v<T, Half>) mant &= ~0x1fffu;
        if constexpr (std::is_same_v<T, BFloat16>) mant &= ~0xffffu;
        const uint32_t bits =
            (static_cast<uint32_t>(sign) << 31) | (static_cast<uint32_t>(127 + e) << 23) | mant;
        float v;
        std::memcpy(&v, &bits, 4);
        store<T>(p, i, v);
      }
    }
  }
}

/// Bytes per element of the storage type.
template <typename T>
constexpr size_t storageSize() {
  return kIsHalfType<T> ? 2 : sizeof(T);
}

/// Byte-exact comparison of element i (any NaN matches any NaN of the same type); on a mismatch
/// returns a message naming the element and both values.
template <typename T>
std::string compareElem(const void* got, const void* want, size_t i) {
  const size_t sz = storageSize<T>();
  if (std::memcmp(static_cast<const char*>(got) + sz * i, static_cast<const char*>(want) + sz * i,
                  sz) == 0) {
    return {};
  }
  const Acc<T> g = load<T>(got, i), w = load<T>(want, i);
  if constexpr (!std::is_integral_v<Acc<T>>) {
    if (std::isnan(g) && std::isnan(w)) return {};
  }
  return "element " + std::to_string(i) + ": got " + std::to_string(g) + " want " +
         std::to_string(w);
}

/// First mismatching element over count elements, or "" when all match.
template <typename T>
std::string compareAll(const void* got, const void* want, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    std::string m = compareElem<T>(got, want, i);
    if (!m.empty()) return m;
  }
  return {};
}

/// A byte buffer with guard bytes around the data at a chosen byte offset, to catch writes
/// outside [data, data + bytes).
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;

  GuardedBuffer(size_t bytes, size_t offset)
      : bytes_(bytes), offset_(offset), storage_(bytes + 2 * kGuard + offset + 64, kPattern) {
    // Start at a 64-byte boundary, then add the requested misalignment.
    const auto base = reinterpret_cast<uintptr_t>(storage_.data()) + kGuard;
    data_ = reinterpret_cast<unsigned char*>((base + 63) / 64 * 64 + offset_);
  }
  unsigned char* data() { return data_; }
  /// True when every byte outside the data range still holds the guard pattern.
  bool guardsIntact() const {
    const unsigned char* begin = storage_.data();
    const unsigned char* end = begin + storage_.size();
    for (const unsigned char* p = begin; p < data_; ++p) {
      if (*p != kPattern) return false;
    }
    for (const unsigned char* p = data_ + bytes_; p < end; ++p) {
      if (*p != kPattern) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  size_t offset_;
  std::vector<unsigned char> storage_;
  unsigned char* data_;
};

inline std::string paramName(DataType t, RedOp op) {
  return std::string(dataTypeName(t)) + "_" + redOpName(op);
}

}  // namespace braid::kernels::test
