// One rank's share of the device collective checks, usable from ranks-as-threads and
// ranks-as-processes: every collective, dtype and op, in place and out of place, odd counts,
// each result checked element by element against a CPU reference. Returns "" or what failed.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/rank_threads.h"

namespace braid::cudatest {

/// Rank r's input of `count` elements (the kit's closed form for op).
inline std::vector<char> rankInput(int r, size_t count, DataType t, RedOp op) {
  return testing::rankInput(Collective::kAllReduce, t, op, count, 1, r);
}

/// The reduction over ranks 0..n-1 of rankInput (kAvg divided by n as the schedules finalize).
inline std::vector<char> reducedInputs(int n, size_t count, DataType t, RedOp op) {
  return testing::expectedOutput(Collective::kAllReduce, t, op, count, n, 0, -1);
}

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { cudaMalloc(&p, bytes + 16); }
  ~Device() { DeferFrees::free(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  char* c() { return static_cast<char*>(p); }
};

/// A non-blocking stream of one rank's own. Ranks that are threads of one process never share a
/// stream (the legacy default one included): a collective's stream wait would hold the other
/// ranks' work queued behind it, which that collective needs (a deadlock, as with NCCL).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
  CudaStream handle() const { return CudaStream{s}; }
};

/// Runs the checks on `dc` for the given collectives; every rank calls it with the same args.
///
/// Ranks may be threads of one process sharing a GPU, so nothing here may synchronise the whole
/// device or the legacy default stream while a peer's collective is in flight (that waits for the
/// peer's stream, which waits for this rank: a deadlock, as with NCCL): one non-blocking stream,
/// cudaMemcpyAsync on it, and buffers allocated once before and freed once after all collectives.
/// Under a forced `algo` the collectives it cannot run are left out (algorithmRuns).
inline std::string checkDeviceCollectives(DeviceCommunicator& dc, const std::vector<size_t>& counts,
                                          bool allTypes, Algorithm algo = Algorithm::kAuto) {
  const int n = dc.size(), r = dc.rank();
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return "cudaStreamCreate failed";
  }
  CudaStream s{stream};
  std::string errors;
  auto note = [&](const std::string& what) {
    if (errors.size() < 2000) errors += fmt::format("rank {}: {}\n", r, what);
  };
  auto sync = [&](const char* what) {
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) note(fmt::format("{}: stream error {}", what, cudaGetErrorString(e)));
    dc.checkAsyncError();
  };
  auto up = [&](void* dst, const void* src, size_t bytes) {
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
    sync("upload");
  };
  auto down = [&](void* dst, const void* src, size_t bytes) {
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
    sync("download");
  };
  size_t maxCount = 1;
  for (size_t c : counts) maxCount = std::max(maxCount, c);
  const size_t cap = maxCount * n * 8;
  Device bufA(cap), bufB(cap);
  char* A = bufA.c();
  char* B = bufB.c();
  std::vector<DataType> types(std::begin(kAllTypes), std::end(kAllTypes));
  if (!allTypes) types = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64};
  for (size_t count : counts) {
    for (DataType t : types) {
      const size_t e = dataTypeSize(t), bytes = count * e;
      for (RedOp op : kAllOps) {
        const auto mine = rankInput(r, count, t, op);
        const auto want = reducedInputs(n, count, t, op);
        for (bool inPlace : {false, true}) {
          const std::string tag = fmt::format("{} x {} {} {}", count, dataTypeName(t),
                                              redOpName(op), inPlace ? "in-place" : "out-of-place");
          std::vector<char> got(bytes);
          // allReduce
          up(A, mine.data(), bytes);
          void* dst = inPlace ? A : B;
          dc.allReduce(A, dst, count, t, op, s);
          down(got.data(), dst, bytes);
          auto ok = sameBytes(got.data(), want.data(), count, t);
          if (!ok) note("allReduce " + tag + ": " + ok.message());
          // reduceScatter: input n*count (rank q's block = slice q of a long input)
          const auto longIn = rankInput(r, count * n, t, op);
          const auto longWant = reducedInputs(n, count * n, t, op);
          up(A, longIn.data(), bytes * n);
          void* rsDst = inPlace ? A + r * bytes : B;
          dc.reduceScatter(A, rsDst, count, t, op, s);
          down(got.data(), rsDst, bytes);
          ok = sameBytes(got.data(), longWant.data() + r * bytes, count, t);
          if (!ok) note("reduceScatter " + tag + ": " + ok.message());
          // reduce to the last rank
          const int root = n - 1;
          up(A, mine.data(), bytes);
          void* rDst = inPlace ? A : B;
          const bool rootedRun = algorithmRuns(algo, Collective::kReduce);
          if (rootedRun) dc.reduce(A, rDst, count, t, op, root, s);
          sync("reduce");
          if (rootedRun && r == root) {
            down(got.data(), rDst, bytes);
            ok = sameBytes(got.data(), want.data(), count, t);
            if (!ok) note("reduce " + tag + ": " + ok.message());
          }
          if (op != RedOp::kSum) continue;  // the data movers once per type
          // allGather
          void* agSrc = inPlace ? B + r * bytes : A;
          up(agSrc, mine.data(), bytes);
          dc.allGather(agSrc, B, count, t, s);
          std::vector<char> all(bytes * n);
          down(all.data(), B, bytes * n);
          for (int q = 0; q < n; ++q) {
            ok = sameBytes(all.data() + q * bytes, rankInput(q, count, t, op).data(), count, t);
            if (!ok) note(fmt::format("allGather {} block {}: {}", tag, q, ok.message()));
          }
          // broadcast from rank 0
          if (rootedRun) {
            up(A, mine.data(), bytes);
            void* bDst = inPlace ? A : B;
            dc.broadcast(A, bDst, count, t, 0, s);
            down(got.data(), bDst, bytes);
            ok = sameBytes(got.data(), rankInput(0, count, t, op).data(), count, t);
            if (!ok) note("broadcast " + tag + ": " + ok.message());
          }
          // send/recv around a ring (even ranks send first)
          if (n > 1 && !inPlace) {
            const int next = (r + 1) % n, prev = (r + n - 1) % n;
            up(A, mine.data(), bytes);
            if (r % 2 == 0) {
              dc.send(A, count, t, next, s);
              dc.recv(B, count, t, prev, s);
            } else {
              dc.recv(B, count, t, prev, s);
              dc.send(A, count, t, next, s);
            }
            down(got.data(), B, bytes);
            ok = sameBytes(got.data(), rankInput(prev, count, t, op).data(), count, t);
            if (!ok) note("send/recv " + tag + ": " + ok.message());
          }
        }
      }
    }
  }
  dc.synchronize();
  cudaStreamDestroy(stream);
  return errors;
}

}  // namespace braid::cudatest
