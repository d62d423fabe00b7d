// All-reduce on device buffers with ranks as THREADS of one process sharing one GPU (one CUDA
// context), timed as nccl-tests does: enqueue the iterations on each rank's own stream, then
// synchronize. The bench/perf driver runs ranks as processes (one context each, which the GPU
// time-slices); this one isolates the device communicator from that, so the two tables side by
// side say what the contexts cost.
//
//   gpu_device_threads_bench [--ranks 2] [--min 8] [--max 256M] [--factor 4] [--iters 20]
//                            [--warmup 5]
//
// One line per size: time per op (slowest rank), algbw and busbw (nccl-tests' 2(n-1)/n), and
// #wrong (every element of every rank's float32 sum checked once per size). Exits 77 without a
// GPU, 1 on a wrong element or an error.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "common/error.h"

namespace {

using namespace braid;

void check(cudaError_t e, int rank, const char* what) {
  if (e != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: {}: {}", rank, what, cudaGetErrorString(e));
  }
}

size_t parseBytes(const std::string& flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1 << 10;
  if (*end == 'M' || *end == 'm') scale = 1 << 20;
  if (*end == 'G' || *end == 'g') scale = 1 << 30;
  BRAID_ENFORCE(end != text && v >= 0, ErrorCode::kInvalidUsage, "{}: '{}' is not a size", flag,
                text);
  return static_cast<size_t>(v * scale);
}

struct Flags {
  int ranks = 2;
  size_t minBytes = 8, maxBytes = 256 << 20;
  int factor = 4, iters = 20, warmup = 5;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    BRAID_ENFORCE(i + 1 < argc, ErrorCode::kInvalidUsage, "{} needs a value", a);
    const char* v = argv[++i];
    if (a == "--ranks")
      f.ranks = std::atoi(v);
    else if (a == "--min")
      f.minBytes = parseBytes(a, v);
    else if (a == "--max")
      f.maxBytes = parseBytes(a, v);
    else if (a == "--factor")
      f.factor = std::atoi(v);
    else if (a == "--iters")
      f.iters = std::atoi(v);
    else if (a == "--warmup")
      f.warmup = std::atoi(v);
    else
      fail(ErrorCode::kInvalidUsage, "unknown flag {}", a);
  }
  BRAID_ENFORCE(
      f.ranks >= 1 && f.factor >= 2 && f.iters >= 1 && f.warmup >= 0 && f.minBytes <= f.maxBytes,
      ErrorCode::kInvalidUsage, "bad flags: ranks {}, factor {}, iters {}, warmup {}", f.ranks,
      f.factor, f.iters, f.warmup);
  return f;
}

struct Shared {
  explicit Shared(int n) : sync(n), seconds(n), wrong(n) {}
  std::barrier<> sync;
  std::vector<double> seconds;
  std::vector<long> wrong;
  std::atomic<long> totalWrong{0};
};

void rankMain(int rank, const Flags& f, const std::shared_ptr<Store>& store, Shared& shared) {
  const int n = f.ranks;
  Communicator host = Communicator::fromStore(store, rank, n);
  check(cudaSetDevice(0), rank, "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), rank, "cudaStreamCreate");
  DeviceCommunicator dc = DeviceCommunicator::create(host, 0);
  const size_t maxCount = std::max<size_t>(f.maxBytes / 4, 1);
  float *in = nullptr, *out = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&in), maxCount * 4), rank, "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&out), maxCount * 4), rank, "cudaMalloc");
  std::vector<float> hostIn(maxCount), hostOut(maxCount);
  // Small integers: the float32 sum is exact, so every element compares exactly.
  for (size_t i = 0; i < maxCount; ++i) hostIn[i] = static_cast<float>((i * 7 + rank) % 64);
  check(cudaMemcpy(in, hostIn.data(), maxCount * 4, cudaMemcpyHostToDevice), rank, "upload");
  check(cudaDeviceSynchronize(), rank, "upload");
  shared.sync.arrive_and_wait();

  for (size_t bytes = f.minBytes; bytes <= f.maxBytes; bytes *= f.factor) {
    const size_t count = std::max<size_t>(bytes / 4, 1);
    auto run = [&](int iters) {
      for (int i = 0; i < iters; ++i) {
        dc.allReduce(in, out, count, DataType::kFloat32, RedOp::kSum, CudaStream{stream});
      }
      check(cudaStreamSynchronize(stream), rank, "cudaStreamSynchronize");
      dc.checkAsyncError();
    };
    run(std::max(f.warmup, 1));
    long wrong = 0;
    check(cudaMemcpyAsync(hostOut.data(), out, count * 4, cudaMemcpyDeviceToHost, stream), rank,
          "download");
    check(cudaStreamSynchronize(stream), rank, "download");
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>((i * 7 + q) % 64);
      if (hostOut[i] != want) ++wrong;
    }
    shared.sync.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    run(f.iters);
    shared.seconds[rank] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / f.iters;
    shared.wrong[rank] = wrong;
    shared.totalWrong += wrong;
    shared.sync.arrive_and_wait();
    if (rank == 0) {
      const double t = *std::max_element(shared.seconds.begin(), shared.seconds.end());
      long bad = 0;
      for (long w : shared.wrong) bad += w;
      const double algbw = static_cast<double>(count * 4) / t / 1e9;
      fmt::print("{:>12} {:>12} {:>10.1f} {:>8.2f} {:>8.2f} {:>7}\n", count * 4, count, t * 1e6,
                 algbw, algbw * 2.0 * (n - 1) / n, bad);
      std::fflush(stdout);
    }
    shared.sync.arrive_and_wait();
    if (bytes > f.maxBytes / f.factor) break;
  }
  dc.synchronize();
  shared.sync.arrive_and_wait();  // no rank frees while a peer's collective may be in flight
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Flags f = parse(argc, argv);
    // Before CUDA starts (a value the user set wins): two streams per rank thread overfill the
    // default 8 hardware queues, and a stream wait then holds work queued behind it.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      fmt::print(stderr, "gpu_device_threads_bench: no CUDA device\n");
      return 77;
    }
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), 0, "cudaGetDeviceProperties");
    fmt::print(
        "# braid all_reduce, {} ranks as threads of one process on {} (one context), "
        "float32 sum, {} iterations after {} warm-up\n",
        f.ranks, prop.name, f.iters, f.warmup);
    fmt::print("# {:>10} {:>12} {:>10} {:>8} {:>8} {:>7}\n", "size(B)", "count", "time(us)",
               "algbw", "busbw", "#wrong");
    auto store = makeInMemoryStore();
    Shared shared(f.ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < f.ranks; ++r) {
      threads.emplace_back([&, r] {
        try {
          rankMain(r, f, store, shared);
        } catch (const std::exception& e) {
          fmt::print(stderr, "gpu_device_threads_bench: rank {}: {}\n", r, e.what());
          std::fflush(stderr);
          std::_Exit(1);  // the peers wait at a barrier that this rank will never reach
        }
      });
    }
    for (auto& t : threads) t.join();
    return shared.totalWrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpu_device_threads_bench: {}\n", e.what());
    return 1;
  }
}
