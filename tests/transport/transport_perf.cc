// transport_perf: two forked ranks measure ping-pong latency (8-byte messages, round trip / 2)
// and one-directional streaming bandwidth (128 KiB slots, K = 8, memcpy in and out) over shm,
// tcp and (where built) ucx, which uses the UCX_TLS of the environment. Not a test; run by hand:
//   build-*/tests/transport/transport_perf [shm|tcp|ucx|ofi|all] [round trips] [streamed MiB]
#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "tests/transport/test_support.h"

using namespace braid;
using namespace braid::transport;
using namespace braid::transport::testing;

namespace {

// Spins (the latency path) and only then sleeps on the doorbell; bounded by `seconds`.
int gSpins = 200000;  // tcp: short, its progress threads need the cores

template <typename Ready>
bool spinWait(Endpoint& ep, Ready ready, double seconds) {
  for (int i = 0; i < gSpins; ++i) {
    if (ready()) return true;
  }
  return waitFor(ep, ready, seconds);
}

struct Result {
  double latencyMicros = 0;  // median batch
  double bestLatencyMicros = 0;
  double bandwidthGBs = 0;
};

int rankMain(int rank, Kind kind, const std::string& dir, const std::string& jobId, int pingIters,
             size_t streamBytes, int resultFd) {
  FileKeyValue kv(dir);
  EndpointConfig c = makeConfig(rank, 2, {kind, kind}, jobId);
  c.channels = 2;
  c.slots = 8;
  c.slotBytes = 128 << 10;
  auto ep = connect(c, kv);
  const int peer = 1 - rank;
  // Ping-pong on channel 0.
  SendChannel& out = ep->send(peer, 0);
  RecvChannel& in = ep->recv(peer, 0);
  uint64_t value = 0;
  auto pingPong = [&](int iters) {
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) {
        void* slot = nullptr;
        if (!spinWait(
                *ep, [&] { return (slot = out.tryAcquire()) != nullptr; }, 10))
          return false;
        std::memcpy(slot, &value, 8);
        out.post(8, MessageMeta{});
      }
      const void* data = nullptr;
      if (!spinWait(
              *ep, [&] { return (data = in.tryPeek(nullptr, nullptr)) != nullptr; }, 10)) {
        return false;
      }
      std::memcpy(&value, data, 8);
      in.release();
      ++value;
      if (rank == 1) {
        void* slot = nullptr;
        if (!spinWait(
                *ep, [&] { return (slot = out.tryAcquire()) != nullptr; }, 10))
          return false;
        std::memcpy(slot, &value, 8);
        out.post(8, MessageMeta{});
      }
    }
    return true;
  };
  if (!pingPong(pingIters / 10)) return 3;  // warm-up
  // Batches of 1000 round trips: 2 cores shared with other work make single long runs noisy, so
  // report the median and the best batch.
  std::vector<double> batches;
  for (int done = 0; done < pingIters; done += 1000) {
    auto start = Clock::now();
    if (!pingPong(1000)) return 3;
    batches.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 1000 / 2);
  }
  std::sort(batches.begin(), batches.end());

  // Streaming on channel 1: rank 0 copies a source buffer into slots, rank 1 copies out.
  const size_t slot = c.slotBytes;
  std::vector<char> buffer(size_t{64} << 20, 1);
  const size_t pieces = streamBytes / slot;
  auto stream = [&](size_t count) {
    for (size_t i = 0; i < count; ++i) {
      char* at = buffer.data() + (i * slot) % buffer.size();
      if (rank == 0) {
        SendChannel& s = ep->send(1, 1);
        void* dst = nullptr;
        if (!spinWait(
                *ep, [&] { return (dst = s.tryAcquire()) != nullptr; }, 10))
          return false;
        std::memcpy(dst, at, slot);
        s.post(slot, MessageMeta{});
      } else {
        RecvChannel& r = ep->recv(0, 1);
        const void* src = nullptr;
        size_t bytes = 0;
        if (!spinWait(
                *ep, [&] { return (src = r.tryPeek(&bytes, nullptr)) != nullptr; }, 10)) {
          return false;
        }
        std::memcpy(at, src, bytes);
        r.release();
      }
    }
    return true;
  };
  if (!stream(64)) return 4;
  // Both sides start timing after a ping-pong so the clocks line up.
  if (!pingPong(1)) return 3;
  auto start = Clock::now();
  if (!stream(pieces)) return 4;
  if (!pingPong(1)) return 3;  // the receiver has everything once this returns
  double streamSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (rank == 0) {
    Result result;
    result.latencyMicros = batches[batches.size() / 2] * 1e6;
    result.bestLatencyMicros = batches.front() * 1e6;
    result.bandwidthGBs = static_cast<double>(pieces * slot) / streamSeconds / 1e9;
    if (write(resultFd, &result, sizeof result) != sizeof result) return 5;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = argc > 1 ? argv[1] : "all";
  int pingIters = std::max(1000, argc > 2 ? std::atoi(argv[2]) : 100000);
  size_t streamBytes = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4096) << 20;  // MiB
  for (Kind kind : {Kind::kShm, Kind::kTcp, Kind::kUcx, Kind::kOfi, Kind::kVerbs}) {
    if (which != "all" && which != kindName(kind)) continue;
    if (!kindAvailable(kind)) continue;
    // tcp, ucx, ofi and verbs: short, their progress threads need the cores.
    gSpins = kind == Kind::kShm ? 200000 : 64;
    char pattern[] = "/tmp/braid-perf-kv-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return 1;
    std::string dir = pattern;
    std::string jobId = uniqueJobId("perf");
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t p0 =
        forkChild([&] { return rankMain(0, kind, dir, jobId, pingIters, streamBytes, fds[1]); });
    pid_t p1 =
        forkChild([&] { return rankMain(1, kind, dir, jobId, pingIters, streamBytes, fds[1]); });
    int s0 = waitChild(p0, Deadline::after(300)), s1 = waitChild(p1, Deadline::after(300));
    Result result;
    bool ok = s0 == 0 && s1 == 0 && read(fds[0], &result, sizeof result) == sizeof result;
    close(fds[0]);
    close(fds[1]);
    std::filesystem::remove_all(dir);
    if (!ok) {
      fmt::print("{}: failed (rank 0 exit {}, rank 1 exit {})\n", kindName(kind), s0, s1);
      return 1;
    }
    const char* tls = getenv("UCX_TLS");
    const char* provider = getenv("BRAID_OFI_PROVIDER");
    std::string name =
        kind == Kind::kUcx   ? fmt::format("ucx (UCX_TLS={})", tls ? tls : "unset")
        : kind == Kind::kOfi ? fmt::format("ofi (BRAID_OFI_PROVIDER={})", provider ? provider : "unset")
                             : std::string(kindName(kind));
    fmt::print(
        "{}: ping-pong 8 B latency (round trip / 2) median {:.3f} us, best {:.3f} us "
        "({} round trips); streaming {} MiB in 128 KiB slots, K=8: {:.2f} GB/s\n",
        name, result.latencyMicros, result.bestLatencyMicros, pingIters, streamBytes >> 20,
        result.bandwidthGBs);
  }
  return 0;
}
