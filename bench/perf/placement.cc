#include "bench/perf/placement.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"

namespace braid::bench {

namespace {

constexpr int kBatches = 9;
constexpr int kRoundsPerBatch = 200;
constexpr auto kPatience = std::chrono::seconds(1);

using Clock = std::chrono::steady_clock;

}  // namespace

// One cache line for the ball, one for rank 1's CPU (so reading it does not disturb the ball).
struct PlacementProbe::Page {
  alignas(64) std::atomic<uint64_t> ball;
  alignas(64) std::atomic<int> cpu1;
};

PlacementProbe::PlacementProbe(World& world) : rank_(world.rank()) {
  const bool pair = world.size() >= 2 && world.comm().nodeOf()[0] == world.comm().nodeOf()[1];
  if (!pair) {
    world.allGatherLines("");  // the others' half of the exchange below
    return;
  }
  std::string name;
  int fd = -1;
  if (rank_ == 0) {
    std::random_device rd;
    name = "/braid-placement-" + std::to_string(getpid()) + "-" + std::to_string(rd());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, sizeof(Page)) != 0) {
      close(fd);
      shm_unlink(name.c_str());
      fd = -1;
    }
  }
  // Rank 0's name, or "" when it could not make the page (the probe is then off everywhere).
  const std::vector<std::string> lines = world.allGatherLines(fd >= 0 ? name : "");
  name = lines[0];
  if (rank_ == 1 && !name.empty()) fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd >= 0) {
    void* p = mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) page_ = static_cast<Page*>(p);
  }
  if (rank_ == 0 && page_ != nullptr) page_->cpu1.store(-1);  // rank 1 has not said yet
  // Both mapped (or failed) before the name goes; a rank that could not map says so.
  const std::vector<std::string> mapped = world.allGatherLines(page_ ? "ok" : "");
  if (rank_ == 0 && !name.empty()) shm_unlink(name.c_str());
  off_ = mapped[0] != "ok" || mapped[1] != "ok" || rank_ > 1;
}

PlacementProbe::~PlacementProbe() {
  if (page_ != nullptr) munmap(page_, sizeof(Page));
}

double PlacementProbe::measure() {
  if (off_) return -1;
  // Rank 0 serves odd values and waits for the next even one; rank 1 answers. Every wait is
  // bounded; a peer that does not answer turns the probe off for the rest of the run.
  auto await = [&](uint64_t want) {
    const auto until = Clock::now() + kPatience;
    for (int spin = 0; page_->ball.load(std::memory_order_acquire) != want; ++spin) {
      if ((spin & 1023) == 1023) {
        if (Clock::now() > until) return false;
        sched_yield();  // oversubscribed: let the peer run
      }
    }
    return true;
  };
  std::vector<double> batches;
  for (int b = -1; b < kBatches; ++b) {  // batch -1 warms up (both threads on their CPUs)
    const auto start = Clock::now();
    for (int i = 0; i < kRoundsPerBatch; ++i) {
      bool answered;
      if (rank_ == 0) {
        page_->ball.store(ball_ + 1, std::memory_order_release);
        answered = await(ball_ + 2);
      } else {
        answered = await(ball_ + 1);
        if (answered) page_->ball.store(ball_ + 2, std::memory_order_release);
      }
      if (!answered) {
        off_ = true;
        return -1;
      }
      ball_ += 2;
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    if (b >= 0) batches.push_back(ns / kRoundsPerBatch);
  }
  if (rank_ == 1) {
    page_->cpu1.store(sched_getcpu(), std::memory_order_release);
    return -1;
  }
  cpu0_ = sched_getcpu();
  // Rank 1 writes its CPU after its last answer: wait for it a moment (bounded).
  const auto until = Clock::now() + std::chrono::milliseconds(100);
  cpu1_ = -1;
  while (Clock::now() < until && (cpu1_ = page_->cpu1.exchange(-1)) < 0) sched_yield();
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

}  // namespace braid::bench
