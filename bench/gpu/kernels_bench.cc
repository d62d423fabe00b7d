// Validate-and-time harness for the CUDA element kernels: checks each kernel against its CPU
// reference (kernels/cuda/reference.h) at a small odd size, then times it at the requested size
// against cudaMemcpy D2D of the same bytes.
//
//   gpu_kernels_bench [--bytes 256M] [--iters 20] [--types float,bfloat16] [--ops sum]
//
// Prints one line per (kernel, dtype, op): time per call, the buffer's algorithm bandwidth
// (bytes / time) and the memory traffic bandwidth (bytes read + written / time), then the copy
// baseline. Exits 1 on a validation failure, 77 without a GPU.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/env.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reference.h"
#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace {

using namespace braid;
namespace kc = braid::kernels::cuda;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fmt::print(stderr, "gpu_kernels_bench: {}: {}\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

std::vector<char> randomInts(size_t count, DataType t, uint32_t seed) {
  // Small integers as values of the type: exact in every dtype, so results compare bytewise.
  std::vector<char> b(count * dataTypeSize(t));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    const double v = static_cast<int>(rng() % 17) - 8;
    kernels::storeElement(t, b.data(), i, v);
  }
  return b;
}

bool validate(DataType t, RedOp op) {
  const size_t n = 100003;
  const size_t bytes = n * dataTypeSize(t);
  auto a = randomInts(n, t, 1), b = randomInts(n, t, 2);
  void *da, *db, *d0, *d1;
  check(cudaMalloc(&da, bytes), "cudaMalloc");
  check(cudaMalloc(&db, bytes), "cudaMalloc");
  check(cudaMalloc(&d0, bytes), "cudaMalloc");
  check(cudaMalloc(&d1, bytes), "cudaMalloc");
  check(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice), "upload");
  check(static_cast<cudaError_t>(kc::reduceCopyAsync(d0, d1, da, db, n, t, op, 1, nullptr)),
        "reduceCopyAsync");
  std::vector<char> want(bytes), got0(bytes), got1(bytes);
  kc::reference::reduceCopy(want.data(), nullptr, a.data(), b.data(), n, t, op);
  check(cudaMemcpy(got0.data(), d0, bytes, cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(got1.data(), d1, bytes, cudaMemcpyDeviceToHost), "download");
  const void* srcs[3] = {da, db, da};
  const void* hsrcs[3] = {a.data(), b.data(), a.data()};
  check(static_cast<cudaError_t>(kc::reduceManyAsync(d0, srcs, 3, n, t, op, 1, nullptr)),
        "reduceManyAsync");
  std::vector<char> wantMany(bytes), gotMany(bytes);
  kc::reference::reduceMany(wantMany.data(), hsrcs, 3, n, t, op);
  check(cudaMemcpy(gotMany.data(), d0, bytes, cudaMemcpyDeviceToHost), "download");
  cudaFree(da);
  cudaFree(db);
  cudaFree(d0);
  cudaFree(d1);
  const bool ok = want == got0 && want == got1 && wantMany == gotMany;
  if (!ok) {
    fmt::print(stderr, "gpu_kernels_bench: {} {}: GPU result differs from the CPU reference\n",
               dataTypeName(t), redOpName(op));
  }
  return ok;
}

template <typename F>
double timeIt(int iters, F&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) launch();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / iters;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t(256) << 20;
  int iters = 20;
  std::string types = "float,bfloat16", ops = "sum";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--bytes") {
      auto b = parseBytes(value);
      if (!b) {
        fmt::print(stderr, "gpu_kernels_bench: bad --bytes '{}'\n", value);
        return 2;
      }
      bytes = *b;
    } else if (flag == "--iters") {
      iters = std::stoi(value);
    } else if (flag == "--types") {
      types = value;
    } else if (flag == "--ops") {
      ops = value;
    } else {
      fmt::print(stderr, "gpu_kernels_bench: unknown flag {}\n", flag);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print("gpu_kernels_bench: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  fmt::print("# device 0: {}, {} SMs; {} bytes per buffer, {} iterations\n", prop.name,
             prop.multiProcessorCount, bytes, iters);

  // Validation first: every dtype x op named (all of them with --types all --ops all).
  bool ok = true;
  std::vector<DataType> tlist;
  std::vector<RedOp> olist;
  for (const auto& name : split(types)) {
    if (name == "all") {
      for (int t = 0; t < kNumDataTypes; ++t) tlist.push_back(static_cast<DataType>(t));
      continue;
    }
    DataType t;
    if (!parseDataType(name.c_str(), &t)) {
      fmt::print(stderr, "gpu_kernels_bench: unknown type {}\n", name);
      return 2;
    }
    tlist.push_back(t);
  }
  for (const auto& name : split(ops)) {
    if (name == "all") {
      for (int o = 0; o < kNumRedOps; ++o) olist.push_back(static_cast<RedOp>(o));
      continue;
    }
    RedOp o;
    if (!parseRedOp(name.c_str(), &o)) {
      fmt::print(stderr, "gpu_kernels_bench: unknown op {}\n", name);
      return 2;
    }
    olist.push_back(o);
  }
  for (DataType t : tlist)
    for (RedOp o : olist) ok = validate(t, o) && ok;
  fmt::print("# validation against the CPU reference: {}\n", ok ? "OK" : "FAILED");

  void *a, *b, *d0, *d1;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMalloc(&d0, bytes), "cudaMalloc");
  check(cudaMalloc(&d1, bytes), "cudaMalloc");
  check(cudaMemset(a, 0, bytes), "cudaMemset");
  check(cudaMemset(b, 0, bytes), "cudaMemset");
  fmt::print("{:<22} {:>9} {:>6} {:>11} {:>11} {:>12}\n", "# kernel", "type", "op", "time(us)",
             "algbw(GB/s)", "memory(GB/s)");
  auto line = [&](const std::string& kernel, const char* type, const char* op, double sec,
                  double traffic) {
    fmt::print("{:<22} {:>9} {:>6} {:>11.1f} {:>11.1f} {:>12.1f}\n", kernel, type, op, sec * 1e6,
               bytes / sec / 1e9, traffic / sec / 1e9);
  };
  const double copySec = timeIt(iters, [&] {
    check(cudaMemcpyAsync(d0, a, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  });
  line("cudaMemcpy D2D", "-", "-", copySec, 2.0 * bytes);
  for (DataType t : tlist) {
    const size_t n = bytes / dataTypeSize(t);
    for (RedOp o : olist) {
      const double rc =
          timeIt(iters, [&] { kc::reduceCopyAsync(d0, d1, a, b, n, t, o, 1, nullptr); });
      line("reduce-copy (2 out)", dataTypeName(t), redOpName(o), rc, 4.0 * bytes);
      const double r = timeIt(iters, [&] { kc::reduceAsync(d0, a, b, n, t, o, nullptr); });
      line("reduce", dataTypeName(t), redOpName(o), r, 3.0 * bytes);
    }
  }
  const double c2 = timeIt(iters, [&] { kc::copyAsync(d0, d1, a, bytes, nullptr); });
  line("copy (2 out)", "-", "-", c2, 3.0 * bytes);
  check(cudaGetLastError(), "a launch");
  cudaFree(a);
  cudaFree(b);
  cudaFree(d0);
  cudaFree(d1);
  return ok ? 0 : 1;
}
