// What the always-on diagnosis records (the status board's counters and the flight recorder)
// cost a real small all-reduce, measured end to end, side by side in one run: every rank holds
// three communicators, made with BRAID_STATUS_BOARD=0 BRAID_FLIGHT_OPS=0 ("bare"), with
// BRAID_FLIGHT_OPS=0 ("board only") and with the defaults ("board + recorder"), and times blocks
// of 8-byte all-reduces on them in turn (ABCABC...), so drift of the machine (another process, a
// vCPU moving) hits all alike. Prints the median time per op of each and the ratios to bare. Ranks are threads of this process (the per-op path is
// the one processes take).
//   build/bench/micro_record_overhead [ranks=2] [blocks=41] [ops per block=20000] [bytes=8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "braid/braid.hpp"
#include "braid/store.hpp"

namespace {

std::vector<braid::Communicator> makeComms(int ranks) {
  auto store = braid::makeInMemoryStore();
  std::vector<braid::Communicator> comms;
  comms.reserve(ranks);
  std::vector<std::optional<braid::Communicator>> made(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { made[r].emplace(braid::Communicator::fromStore(store, r, ranks)); });
  }
  for (auto& t : threads) t.join();
  for (auto& c : made) comms.push_back(std::move(*c));
  return comms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 41;
  const int opsPerBlock = argc > 3 ? std::atoi(argv[3]) : 20000;
  const size_t count = (argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 8) / sizeof(float);
  if (ranks < 2 || blocks < 1 || opsPerBlock < 1) {
    std::fprintf(stderr, "usage: %s [ranks>=2] [blocks>=1] [ops per block>=1] [bytes]\n", argv[0]);
    return 2;
  }
  // The environment is read when a communicator is made; no rank thread runs meanwhile.
  constexpr int kKinds = 3;
  const char* names[kKinds] = {"bare (BRAID_STATUS_BOARD=0 BRAID_FLIGHT_OPS=0)",
                               "board only (BRAID_FLIGHT_OPS=0)", "board + recorder (defaults)"};
  std::vector<braid::Communicator> kinds[kKinds];
  setenv("BRAID_STATUS_BOARD", "0", 1);
  setenv("BRAID_FLIGHT_OPS", "0", 1);
  kinds[0] = makeComms(ranks);
  unsetenv("BRAID_STATUS_BOARD");
  kinds[1] = makeComms(ranks);
  unsetenv("BRAID_FLIGHT_OPS");
  kinds[2] = makeComms(ranks);

  // times[kind][block] on rank 0, in ns per op.
  std::vector<double> times[kKinds];
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> in(std::max<size_t>(count, 1), 1.0f), out(in.size());
      braid::Communicator* comm[kKinds] = {&kinds[0][r], &kinds[1][r], &kinds[2][r]};
      for (int k = 0; k < kKinds; ++k) {  // warm-up of each
        for (int i = 0; i < 2000; ++i) {
          comm[k]->allReduce(in.data(), out.data(), count, braid::DataType::kFloat32,
                             braid::RedOp::kSum);
        }
      }
      for (int b = 0; b < kKinds * blocks; ++b) {
        const int k = b % kKinds;
        comm[k]->barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < opsPerBlock; ++i) {
          comm[k]->allReduce(in.data(), out.data(), count, braid::DataType::kFloat32,
                             braid::RedOp::kSum);
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (r == 0) {
          times[k].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                             opsPerBlock);
        }
      }
      if (out[0] != float(ranks)) {
        std::fprintf(stderr, "rank %d: all-reduce gave %g, expected %d\n", r, out[0], ranks);
        std::exit(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("%d ranks (threads), %zu B float32 sum, %d blocks of %d ops each, in turn\n", ranks,
              count * sizeof(float), blocks, opsPerBlock);
  const double bare = median(times[0]);
  for (int k = 0; k < kKinds; ++k) {
    const double t = median(times[k]);
    std::printf("%-48s median %7.1f ns/op  %+6.2f%% (%+.1f ns)\n", names[k], t,
                (t / bare - 1) * 100, t - bare);
  }
  return 0;
}
