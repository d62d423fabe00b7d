// The single-copy ideal of a 2-rank all-reduce (issue 14's yardstick): two threads, one per CPU,
// each with its own input of S bytes; each reads its half of both inputs once and writes that
// half of one shared output once, with braid's own reduce kernel. No copies, no handshakes: what
// memory bandwidth allows. Before each size the two threads bounce a cache line (the round trip
// says whether their CPUs share an L3: bench/perf/placement.h classifies < 150 ns "same L3").
// With --outputs 2 each thread writes its half into two outputs, one per rank, in the same pass
// (braid's reduceCopy kernel): what an all-reduce must produce, every rank holding the result.
// The yardstick (--outputs 1, the default) writes a quarter less memory than any
// all-reduce of two ranks' own buffers can.
//
//   single_copy_ideal [-b 1M] [-e 256M] [-f 2] [-n 20] [-w 5] [--cpus 0,1] [--outputs 1|2]
//                     [-J out.json]
// Prints nccl-tests' columns for all_reduce (busbw = algbw x 2(n-1)/n = algbw for 2 ranks).
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};

// Two threads meet: each arrives with its own generation and spins until the other did too.
struct Barrier {
  Line arrived[2];
  void wait(int me, uint64_t gen) {
    arrived[me].v.store(gen, std::memory_order_release);
    while (arrived[1 - me].v.load(std::memory_order_acquire) < gen) {
    }
  }
};

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 1 << 20, maxBytes = 256 << 20;
  int factor = 2, iters = 20, warmup = 5, cpus[2] = {0, 1}, outputs = 1;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "-b") minBytes = parseSize(v), ++i;
    else if (a == "-e") maxBytes = parseSize(v), ++i;
    else if (a == "-f") factor = std::atoi(v), ++i;
    else if (a == "-n") iters = std::atoi(v), ++i;
    else if (a == "-w") warmup = std::atoi(v), ++i;
    else if (a == "-J") json = v, ++i;
    else if (a == "--cpus") std::sscanf(v, "%d,%d", &cpus[0], &cpus[1]), ++i;
    else if (a == "--outputs") outputs = std::atoi(v), ++i;
    else {
      std::fprintf(stderr, "single_copy_ideal: unknown argument '%s' (see the file's top)\n",
                   a.c_str());
      return 2;
    }
  }
  if (minBytes < 64 || maxBytes < minBytes || factor < 2 || iters < 1 ||
      (outputs != 1 && outputs != 2)) {
    std::fprintf(stderr,
                 "single_copy_ideal: need 64 <= -b <= -e, -f >= 2, -n >= 1, --outputs 1 or 2\n");
    return 2;
  }
  std::vector<size_t> sizes;
  for (size_t b = minBytes; b <= maxBytes; b *= factor) sizes.push_back(b / 4 * 4);
  const size_t maxCount = maxBytes / 4;
  std::vector<float> in0(maxCount, 1.0f), in1(maxCount, 2.0f), out(maxCount, 0.0f);
  std::vector<float> out1(outputs == 2 ? maxCount : 0, 0.0f);
  const float* in[2] = {in0.data(), in1.data()};

  Barrier barrier;
  Line ball;
  std::FILE* js = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (!json.empty() && js == nullptr) {
    std::fprintf(stderr, "single_copy_ideal: cannot write %s\n", json.c_str());
    return 2;
  }
  std::printf("# single_copy_ideal: 2 threads on CPUs %d,%d, float sum, braid's %s kernel, "
              "%d output(s), median of %d iterations\n",
              cpus[0], cpus[1], outputs == 2 ? "reduceCopy" : "reduce", outputs, iters);
  std::printf("#%12s %12s %10s %8s %8s %9s\n", "size", "count", "time(us)", "algbw", "busbw",
              "rtt(ns)");
  if (js) {
    std::fprintf(js, "{\"bench\": \"single_copy_ideal\", \"outputs\": %d, \"rows\": [",
                 outputs);
  }

  // Both threads walk the same sizes; thread 0 also times and prints.
  auto work = [&](int me) {
    pin(cpus[me]);
    uint64_t g = 0;
    for (size_t si = 0; si < sizes.size(); ++si) {
      // Placement: round trips of one cache line between the two threads.
      constexpr int kTrips = 2000;
      barrier.wait(me, ++g);
      const auto t0 = Clock::now();
      for (int k = 0; k < kTrips; ++k) {
        const uint64_t mine = 2 * uint64_t(k) + me;
        while (ball.v.load(std::memory_order_acquire) != mine) {
        }
        ball.v.store(mine + 1, std::memory_order_release);
      }
      const double rttNs =
          std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kTrips;
      barrier.wait(me, ++g);
      if (me == 0) ball.v.store(0, std::memory_order_release);
      const size_t n = sizes[si] / 4;
      const size_t half = (n / 2 + 15) / 16 * 16;  // a 64-byte boundary
      const size_t lo = me == 0 ? 0 : std::min(n, half), hi = me == 0 ? std::min(n, half) : n;
      std::vector<double> times;
      for (int it = 0; it < warmup + iters; ++it) {
        barrier.wait(me, ++g);
        const auto s = Clock::now();
        if (outputs == 2) {
          braid::kernels::reduceCopy(out.data() + lo, out1.data() + lo, in[0] + lo, in[1] + lo,
                                     hi - lo, braid::DataType::kFloat32, braid::RedOp::kSum);
        } else {
          braid::kernels::reduce(out.data() + lo, in[0] + lo, in[1] + lo, hi - lo,
                                 braid::DataType::kFloat32, braid::RedOp::kSum);
        }
        barrier.wait(me, ++g);
        if (it >= warmup) {
          times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        }
      }
      if (me != 0) continue;
      std::sort(times.begin(), times.end());
      const double us = times[times.size() / 2];
      const double algbw = sizes[si] / us / 1e3;
      std::printf(" %12zu %12zu %10.1f %8.2f %8.2f %9.0f\n", sizes[si], n, us, algbw, algbw, rttNs);
      std::fflush(stdout);
      if (js) {
        std::fprintf(js, "%s{\"size\": %zu, \"time_us\": %.3f, \"busbw\": %.4f, "
                         "\"placement_ns\": {\"before\": %.1f, \"class\": \"%s\"}}",
                     si ? ", " : "", sizes[si], us, algbw, rttNs,
                     rttNs < 150 ? "same L3" : "apart");
      }
    }
  };
  std::thread peer(work, 1);
  work(0);
  peer.join();
  if (js) {
    std::fprintf(js, "]}\n");
    std::fclose(js);
  }
  return 0;
}
