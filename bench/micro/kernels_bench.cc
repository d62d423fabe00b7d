// Micro-bench of the CPU kernels: reduce (float, half, bfloat16, int32, double; sum and max),
// reduceMany, reduceCopy and copy, with plain memcpy at the same sizes as the reference line.
// Bytes/s count bytes read plus bytes written (reduce: 2 reads + 1 write per element).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace {

using braid::DataType;
using braid::RedOp;

constexpr size_t kSizes[] = {32 << 10, 256 << 10, 4 << 20, 64 << 20};

std::string sizeName(size_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + "MiB"
                            : std::to_string(bytes >> 10) + "KiB";
}

/// A buffer of `bytes` holding small non-zero values of `type` (no subnormals, no overflow).
std::vector<unsigned char> makeInput(DataType type, size_t bytes, int seed) {
  std::vector<unsigned char> buf(bytes);
  const size_t n = bytes / braid::dataTypeSize(type);
  for (size_t i = 0; i < n; ++i) {
    const float v = 1.0f + static_cast<float>((i * 7 + seed) % 13) / 16.0f;
    unsigned char* p = buf.data() + i * braid::dataTypeSize(type);
    switch (type) {
      case DataType::kFloat16: {
        const uint16_t h = braid::kernels::floatToHalf(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBFloat16: {
        const uint16_t h = braid::kernels::floatToBfloat16(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kFloat32:
        std::memcpy(p, &v, 4);
        break;
      case DataType::kFloat64: {
        const double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      default: {
        const int64_t x = static_cast<int64_t>(i % 1000) + seed;
        std::memcpy(p, &x, braid::dataTypeSize(type));
      }
    }
  }
  return buf;
}

void bmReduce(benchmark::State& state, DataType type, RedOp op, size_t bytes) {
  auto a = makeInput(type, bytes, 1), b = makeInput(type, bytes, 2);
  std::vector<unsigned char> d(bytes);
  const size_t count = bytes / braid::dataTypeSize(type);
  for (auto _ : state) {
    braid::kernels::reduce(d.data(), a.data(), b.data(), count, type, op);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 3 * bytes));
}

void bmReduceMany(benchmark::State& state, DataType type, int nsrc, size_t bytes) {
  std::vector<std::vector<unsigned char>> srcs;
  std::vector<const void*> ptrs;
  for (int k = 0; k < nsrc; ++k) srcs.push_back(makeInput(type, bytes, k));
  for (auto& s : srcs) ptrs.push_back(s.data());
  std::vector<unsigned char> d(bytes);
  const size_t count = bytes / braid::dataTypeSize(type);
  for (auto _ : state) {
    braid::kernels::reduceMany(d.data(), ptrs.data(), nsrc, count, type, RedOp::kSum);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (nsrc + 1) * bytes));
}

void bmReduceCopy(benchmark::State& state, DataType type, size_t bytes) {
  auto a = makeInput(type, bytes, 1), b = makeInput(type, bytes, 2);
  std::vector<unsigned char> d0(bytes), d1(bytes);
  const size_t count = bytes / braid::dataTypeSize(type);
  for (auto _ : state) {
    braid::kernels::reduceCopy(d0.data(), d1.data(), a.data(), b.data(), count, type, RedOp::kSum);
    benchmark::DoNotOptimize(d1.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 4 * bytes));
}

template <bool kUseBraidCopy>
void bmCopy(benchmark::State& state, size_t bytes) {
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 2);
  for (auto _ : state) {
    if constexpr (kUseBraidCopy) {
      braid::kernels::copy(dst.data(), src.data(), bytes);
    } else {
      std::memcpy(dst.data(), src.data(), bytes);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void registerAll() {
  constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                 DataType::kInt32, DataType::kFloat64};
  for (size_t bytes : kSizes) {
    const std::string sz = sizeName(bytes);
    benchmark::RegisterBenchmark(("memcpy/" + sz).c_str(), bmCopy<false>, bytes);
    benchmark::RegisterBenchmark(("copy/" + sz).c_str(), bmCopy<true>, bytes);
    for (DataType t : kTypes) {
      for (RedOp op : {RedOp::kSum, RedOp::kMax}) {
        benchmark::RegisterBenchmark(("reduce/" + std::string(braid::dataTypeName(t)) + "/" +
                                      braid::redOpName(op) + "/" + sz)
                                         .c_str(),
                                     bmReduce, t, op, bytes);
      }
    }
    for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
      benchmark::RegisterBenchmark(
          ("reduceCopy/" + std::string(braid::dataTypeName(t)) + "/sum/" + sz).c_str(),
          bmReduceCopy, t, bytes);
      benchmark::RegisterBenchmark(
          ("reduceMany8/" + std::string(braid::dataTypeName(t)) + "/sum/" + sz).c_str(),
          bmReduceMany, t, 8, bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
