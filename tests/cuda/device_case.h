// One collective case of the test kit (tests/kit/host_case.h) on device buffers: both of the
// case's host buffers copied into device memory, the API under test called on the mapped
// pointers and a stream, both buffers copied back and checked element by element against the
// kit's reference. For DeviceCommunicator (ranks as threads or processes) and braid's
// libnccl.so.2 on device buffers.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "tests/cuda/rank_threads.h"
#include "tests/kit/alltoallv_case.h"
#include "tests/kit/host_case.h"

namespace braid::cudatest {

/// Two device buffers allocated once for a rank's cases. Ranks that are threads sharing a GPU must
/// not cudaMalloc or cudaFree between collectives: cudaFree waits for the whole device, which
/// includes a peer's stream waiting for this rank's next collective (a deadlock).
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&a_, bytes) != cudaSuccess || cudaMalloc(&b_, bytes) != cudaSuccess)
      throw std::runtime_error(fmt::format("cudaMalloc of 2 x {} bytes failed", bytes));
  }
  ~DeviceScratch() {
    DeferFrees::free(a_);
    DeferFrees::free(b_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  char* in() const { return static_cast<char*>(a_); }
  char* out() const { return static_cast<char*>(b_); }
  size_t bytes() const { return bytes_; }

 private:
  void* a_ = nullptr;
  void* b_ = nullptr;
  size_t bytes_;
};

/// testing::runCaseOn with the buffers in `scratch` on `stream`: call(deviceSend, deviceRecv)
/// enqueues the collective; this waits for the stream before reading the result back.
inline std::string runCaseOnDevice(int r, int n, const testing::CollectiveCase& c,
                                   DeviceScratch& scratch, cudaStream_t stream,
                                   const std::function<void(const void*, void*)>& call) {
  return testing::runCaseOn(
      r, n, c, [&](std::vector<char>& in, std::vector<char>& out, const void* send, void* recv) {
        if (in.size() > scratch.bytes() || out.size() > scratch.bytes())
          throw std::runtime_error(
              fmt::format("{}: buffers of {} and {} bytes exceed the scratch {}", c.name(),
                          in.size(), out.size(), scratch.bytes()));
        auto onDevice = [&](const void* p) {
          const char* q = static_cast<const char*>(p);
          if (q >= in.data() && q < in.data() + in.size()) return scratch.in() + (q - in.data());
          return scratch.out() + (q - out.data());
        };
        auto check = [&](cudaError_t e, const char* what) {
          if (e != cudaSuccess)
            throw std::runtime_error(
                fmt::format("{}: {}: {}", c.name(), what, cudaGetErrorString(e)));
        };
        check(cudaMemcpyAsync(scratch.in(), in.data(), in.size(), cudaMemcpyHostToDevice, stream),
              "upload");
        check(
            cudaMemcpyAsync(scratch.out(), out.data(), out.size(), cudaMemcpyHostToDevice, stream),
            "upload");
        call(onDevice(send), onDevice(recv));
        check(cudaMemcpyAsync(in.data(), scratch.in(), in.size(), cudaMemcpyDeviceToHost, stream),
              "download");
        check(
            cudaMemcpyAsync(out.data(), scratch.out(), out.size(), cudaMemcpyDeviceToHost, stream),
            "download");
        check(cudaStreamSynchronize(stream), "stream");
      });
}

/// The stream-ordered call of `coll` (a scheduled or exchange collective) on `dc`.
inline void callDeviceCollective(DeviceCommunicator& dc, const testing::CollectiveCase& c,
                                 const void* send, void* recv, cudaStream_t stream) {
  const CudaStream s{stream};
  switch (c.coll) {
    case Collective::kAllReduce:
      return dc.allReduce(send, recv, c.count, c.type, c.op, s);
    case Collective::kReduceScatter:
      return dc.reduceScatter(send, recv, c.count, c.type, c.op, s);
    case Collective::kAllGather:
      return dc.allGather(send, recv, c.count, c.type, s);
    case Collective::kBroadcast:
      return dc.broadcast(send, recv, c.count, c.type, c.root, s);
    case Collective::kReduce:
      return dc.reduce(send, recv, c.count, c.type, c.op, c.root, s);
    case Collective::kAllToAll:
      return dc.allToAll(send, recv, c.count, c.type, s);
    case Collective::kGather:
      return dc.gather(send, recv, c.count, c.type, c.root, s);
    case Collective::kScatter:
      return dc.scatter(send, recv, c.count, c.type, c.root, s);
    default:
      throw std::runtime_error(
          fmt::format("callDeviceCollective: {} is not a scheduled one", collectiveName(c.coll)));
  }
}

/// All-to-all, gather and scatter on `dc`: every type, counts 0, 1, a prime and past a slot, in
/// place and out of place, roots 0 and n-1; then an uneven allToAllv (zero pairs included) and one
/// in which rank 0 sends nothing.
/// Returns "" or what was wrong (the first few).
/// Under a forced `algo` the collectives it cannot run are left out (algorithmRuns).
inline std::string checkDeviceExchanges(DeviceCommunicator& dc, Algorithm algo = Algorithm::kAuto) {
  const int n = dc.size(), r = dc.rank();
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return "cudaStreamCreate failed";
  std::string errors;
  auto note = [&](const std::string& what) {
    if (!what.empty() && errors.size() < 2000) errors += what + "\n";
  };
  const std::vector<size_t> counts{0, 1, 1009, 300007};
  DeviceScratch scratch(300007 * size_t(n) * 8 + 64);
  for (Collective coll : testing::kExchangeCollectives) {
    if (!algorithmRuns(algo, coll)) continue;
    for (DataType t : testing::kAllTypes) {
      for (size_t count : counts) {
        if (count > 1009 && t != DataType::kFloat32 && t != DataType::kBFloat16) continue;
        for (bool inPlace : {false, true}) {
          for (int root : {0, n - 1}) {
            const testing::CollectiveCase c{coll, t, RedOp::kSum, count, inPlace, root};
            note(runCaseOnDevice(r, n, c, scratch, stream, [&](const void* s, void* d) {
              callDeviceCollective(dc, c, s, d, stream);
            }));
            dc.checkAsyncError();
            if (coll == Collective::kAllToAll) break;  // no root
          }
        }
      }
    }
  }
  // allToAllv of `countOf(from, to)` float32 elements per pair (tests/kit/alltoallv_case.h).
  auto allToAllv = [&](const char* what, const std::function<size_t(int, int)>& countOf) {
    testing::AllToAllvCase v(r, n, countOf);
    cudaMemcpyAsync(scratch.in(), v.in.data(), v.in.size() * 4, cudaMemcpyHostToDevice, stream);
    dc.allToAllv(scratch.in(), v.sendCounts.data(), v.sendDispls.data(), scratch.out(),
                 v.recvCounts.data(), v.recvDispls.data(), DataType::kFloat32, CudaStream{stream});
    cudaMemcpyAsync(v.out.data(), scratch.out(), v.out.size() * 4, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    dc.checkAsyncError();
    note(v.check(what));
  };
  // (from + 2 to) % 3 * 1000 + to elements, 0 for some pairs.
  allToAllv("uneven", [](int from, int to) {
    return (from + 2 * to) % 3 == 0 ? 0 : size_t((from + 2 * to) % 3) * 1000 + size_t(to);
  });
  // Rank 0 sends nothing at all (its call's count is 0) and receives from every other rank.
  allToAllv("rank 0 sends nothing",
            [](int from, int to) { return from == 0 ? 0 : size_t(100 + 10 * to + from); });
  cudaStreamDestroy(stream);
  return errors;
}

}  // namespace braid::cudatest
