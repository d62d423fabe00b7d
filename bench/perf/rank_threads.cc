#include "bench/perf/rank_threads.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace braid::bench {
namespace {

// After one rank's error, how long the others may take to end. Peers of the failed rank fail
// too, but only when their collectives time out (BRAID_TIMEOUT, 60 s by default): past this
// the process exits rather than wait for them.
constexpr auto kGrace = std::chrono::seconds(3);

/// What the rank threads tell the thread that started them.
struct Outcome {
  std::mutex mutex;
  std::condition_variable changed;
  int ended = 0;
  int code = 0;
  int failedRank = -1;  // the first rank that failed, or -1
};

}  // namespace

std::optional<int> runThreadRanks(World& process, int threads, const Options& options,
                                  const std::string& program, const RankMain& rankMain,
                                  const RankError& onError) {
  const UniqueId id = process.shareUniqueId();
  const int size = process.size() * threads;
  Outcome outcome;
  auto body = [&](int rank) {
    int code = 0;
    bool failed = false;
    try {
      std::unique_ptr<World> world = World::joinThread(id, rank, size, process.launcher(), options);
      code = rankMain(*world);
    } catch (const std::exception& e) {
      onError(rank, e);
      failed = true;
    }
    std::lock_guard<std::mutex> lock(outcome.mutex);
    ++outcome.ended;
    outcome.code = std::max(outcome.code, code);
    if (failed && outcome.failedRank < 0) outcome.failedRank = rank;
    outcome.changed.notify_all();
  };

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    const int rank = process.rank() * threads + t;
    try {
      workers.emplace_back(body, rank);
    } catch (const std::exception& e) {  // no thread: the rank fails as if it had started
      onError(rank, e);
      std::lock_guard<std::mutex> lock(outcome.mutex);
      if (outcome.failedRank < 0) outcome.failedRank = rank;
      break;
    }
  }
  const int started = static_cast<int>(workers.size());
  {
    std::unique_lock<std::mutex> lock(outcome.mutex);
    outcome.changed.wait(lock, [&] { return outcome.ended == started || outcome.failedRank >= 0; });
    if (outcome.failedRank >= 0 &&
        !outcome.changed.wait_for(lock, kGrace, [&] { return outcome.ended == started; })) {
      std::fprintf(stderr,
                   "%s: rank %d failed; %d rank thread(s) of this process still running %lld s "
                   "later: exiting\n",
                   program.c_str(), outcome.failedRank, started - outcome.ended,
                   static_cast<long long>(kGrace.count()));
      std::fflush(nullptr);
      std::_Exit(1);  // the stuck threads cannot be stopped, and would hold the exit
    }
  }
  for (auto& worker : workers) worker.join();
  if (outcome.failedRank >= 0) return std::nullopt;
  return outcome.code;
}

}  // namespace braid::bench
