// gpu_all_reduce_perf: nccl-tests' all_reduce_perf table for braid's device collectives
// (DeviceCommunicator over CUDA IPC), ranks launched by braidrun/torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or alone. Each rank uses device LOCAL_RANK % #devices.
//
//   braidrun -n 4 build/bench/gpu.dir/gpu_all_reduce_perf -b 8 -e 1G -f 4
//
// Flags (nccl-tests' subset): -b -e -f -n (iters) -w (warm-up) -c 0|1 (check) -d dtype -o op,
// and --algo auto|ring|oneshot. Times are the slowest rank's (max over ranks).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "common/env.h"
#include "kernels/element_ops.h"
#include "kernels/kernels.h"

namespace {

using namespace braid;

struct Args {
  size_t minBytes = 32 << 20, maxBytes = 32 << 20;
  size_t factor = 2;
  int iters = 20, warmup = 5;
  bool check = true;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  Algorithm algo = Algorithm::kAuto;
};

[[noreturn]] void usage(const std::string& why) {
  fmt::print(stderr,
             "gpu_all_reduce_perf: {}\nflags: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c 0|1 "
             "-d TYPE -o OP --algo auto|ring|oneshot\n",
             why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("flag " + f + " needs a value");
    const std::string v = argv[i + 1];
    auto bytes = [&] {
      auto b = parseBytes(v);
      if (!b) usage("bad size " + v);
      return size_t(*b);
    };
    if (f == "-b")
      a.minBytes = bytes();
    else if (f == "-e")
      a.maxBytes = bytes();
    else if (f == "-f")
      a.factor = std::max<size_t>(2, std::stoul(v));
    else if (f == "-n")
      a.iters = std::stoi(v);
    else if (f == "-w")
      a.warmup = std::stoi(v);
    else if (f == "-c")
      a.check = v != "0";
    else if (f == "-d") {
      if (!parseDataType(v.c_str(), &a.type)) usage("bad type " + v);
    } else if (f == "-o") {
      if (!parseRedOp(v.c_str(), &a.op)) usage("bad op " + v);
    } else if (f == "--algo") {
      if (!parseAlgorithm(v, &a.algo)) usage("bad algo " + v);
    } else
      usage("unknown flag " + f);
  }
  if (a.minBytes > a.maxBytes) usage("-b larger than -e");
  return a;
}

void cudaCheck(cudaError_t e, int rank, const char* what) {
  if (e != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: {}: {}", rank, what, cudaGetErrorString(e));
  }
}

/// Rank r's element i: small integers, exact in every dtype for sum over <= 16 ranks.
double value(int r, size_t i) { return double(int((r * 5 + i * 3) % 7) - 3); }

void fill(std::vector<char>& buf, DataType t, size_t count, int rank, bool expected, int n) {
  for (size_t i = 0; i < count; ++i) {
    double v = 0;
    if (expected) {
      for (int r = 0; r < n; ++r) v += value(r, i);
    } else {
      v = value(rank, i);
    }
    kernels::storeElement(t, buf.data(), i, v);
  }
}

std::string timeText(double us) {
  if (us < 100) return fmt::format("{:7.2f}", us);
  if (us < 10000) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.0f}", us);
}

int run(const Args& a) {
  const bool launched = envString("WORLD_SIZE").has_value();
  Communicator host = launched ? Communicator::fromEnvironment()
                               : Communicator::fromUniqueId(Communicator::uniqueId(), 0, 1);
  const int rank = host.rank(), n = host.size();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fail(ErrorCode::kInvalidUsage, "rank {}: no CUDA device", rank);
  }
  const int device = int(envInt("LOCAL_RANK", rank)) % devices;
  cudaCheck(cudaSetDevice(device), rank, "cudaSetDevice");
  Options options;
  options.algorithm = a.algo;
  DeviceCommunicator dc = DeviceCommunicator::create(host, device, options);
  cudaStream_t stream;
  cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), rank, "cudaStreamCreate");
  const CudaStream s{stream};
  const size_t elem = dataTypeSize(a.type);
  const size_t maxCount = std::max<size_t>(1, a.maxBytes / elem);
  void *in, *out;
  cudaCheck(cudaMalloc(&in, maxCount * elem), rank, "cudaMalloc");
  cudaCheck(cudaMalloc(&out, maxCount * elem), rank, "cudaMalloc");

  if (rank == 0) {
    fmt::print("# braid gpu_all_reduce_perf: {} ranks, device collectives over cuda_ipc, algo {}\n",
               n, algorithmName(a.algo));
    fmt::print("#\n# Using devices\n");
  }
  {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    // One line per rank, gathered so rank 0 prints them in order.
    std::string me = fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10} device {:2d} [{}] {}",
                                 rank, getpid(), "localhost", device, prop.pciBusID, prop.name);
    me.resize(160, ' ');
    std::string all(160 * n, ' ');
    host.allGather(me.data(), all.data(), 160, DataType::kUint8);
    if (rank == 0) {
      for (int r = 0; r < n; ++r) {
        std::string l = all.substr(r * 160, 160);
        l.erase(l.find_last_not_of(' ') + 1);
        fmt::print("{}\n", l);
      }
    }
  }
  if (rank == 0) {
    fmt::print("#\n#{:>77}{:>37}\n", "out-of-place", "in-place");
    fmt::print(
        "#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  "
        "{:>6}  {:>5}\n",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong");
    fmt::print(
        "#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  "
        "{:>6}  {:>5}\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
        "");
  }
  double sumBus = 0;
  int lines = 0;
  int64_t totalWrong = 0;
  for (size_t bytes = a.minBytes;; bytes *= a.factor) {
    const size_t count = std::max<size_t>(1, bytes / elem);
    std::string row = fmt::format("{:12d}  {:12d}  {:>8}  {:>6}  {:6d}", count * elem, count,
                                  dataTypeName(a.type), redOpName(a.op), -1);
    for (bool inPlace : {false, true}) {
      void* dst = inPlace ? in : out;
      std::vector<char> h(count * elem), want(count * elem);
      fill(h, a.type, count, rank, false, n);
      auto upload = [&] {
        cudaCheck(cudaMemcpyAsync(in, h.data(), count * elem, cudaMemcpyHostToDevice, stream), rank,
                  "upload");
      };
      upload();
      for (int i = 0; i < a.warmup; ++i) dc.allReduce(in, dst, count, a.type, a.op, s);
      cudaCheck(cudaStreamSynchronize(stream), rank, "warm-up");
      dc.checkAsyncError();
      host.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < a.iters; ++i) dc.allReduce(in, dst, count, a.type, a.op, s);
      cudaCheck(cudaStreamSynchronize(stream), rank, "timed run");
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          std::max(1, a.iters);
      dc.checkAsyncError();
      host.allReduce(&us, &us, 1, DataType::kFloat64, RedOp::kMax);
      int64_t wrong = 0;
      if (a.check && (a.op == RedOp::kSum)) {
        upload();
        dc.allReduce(in, dst, count, a.type, a.op, s);
        std::vector<char> got(count * elem);
        cudaCheck(cudaMemcpyAsync(got.data(), dst, count * elem, cudaMemcpyDeviceToHost, stream),
                  rank, "download");
        cudaCheck(cudaStreamSynchronize(stream), rank, "check");
        dc.checkAsyncError();
        fill(want, a.type, count, rank, true, n);
        for (size_t i = 0; i < count; ++i) {
          wrong += std::memcmp(got.data() + i * elem, want.data() + i * elem, elem) != 0;
        }
        host.allReduce(&wrong, &wrong, 1, DataType::kInt64, RedOp::kSum);
      }
      totalWrong += wrong;
      const double algbw = count * elem / us / 1e3;
      const double busbw = algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
      sumBus += busbw;
      ++lines;
      row += fmt::format("  {}  {:6.2f}  {:6.2f}  {:5}", timeText(us), algbw, busbw,
                         a.check && a.op == RedOp::kSum ? std::to_string(wrong) : "N/A");
    }
    if (rank == 0) fmt::print("{}\n", row);
    if (bytes >= a.maxBytes || bytes * a.factor > a.maxBytes) break;
  }
  if (rank == 0) {
    fmt::print("# Out of bounds values : {} {}\n", totalWrong, totalWrong ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth    : {:.4g} \n#\n", lines ? sumBus / lines : 0.0);
  }
  dc.synchronize();
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(stream);
  return totalWrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    return run(a);
  } catch (const Error& e) {
    fmt::print(stderr, "gpu_all_reduce_perf: {}: {}\n", errorCodeName(e.code()), e.what());
    return 1;
  }
}
