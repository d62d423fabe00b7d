#include "bench/perf/driver.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/format/names.h"
#include "bench/format/table.h"
#include "bench/perf/args.h"
#include "bench/perf/data.h"
#include "bench/perf/placement.h"
#include "bench/perf/rank_threads.h"
#include "bench/perf/report.h"
#include "bench/perf/target.h"
#include "bench/perf/world.h"
#include "braid/deadline.hpp"
#include "common/env.h"
#include "common/error.h"

namespace braid::bench {
namespace {

void* offsetBy(void* base, size_t elements, size_t elemSize) {
  return static_cast<char*>(base) + elements * elemSize;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

class Bench {
 public:
  Bench(const BenchArgs& args, const CollRunner& runner, World& world, Target& target)
      : args_(args),
        info_(runner.info),
        world_(world),
        target_(target),
        rank_(world.rank()),
        nranks_(world.size()) {}

  /// Runs the sweep; returns the wrong elements summed over ranks and rows.
  int64_t run() {
    checkRoot();
    probe_ = std::make_unique<PlacementProbe>(world_);
    placementNow();
    placement_.startNs = lastPlacementNs_;
    placement_.cpu0 = probe_->cpu0();
    placement_.cpu1 = probe_->cpu1();
    printPreamble();
    send_ = target_.allocate(args_.maxBytes);
    recv_ = target_.allocate(args_.maxBytes);
    if (rank_ == 0) print(formatHeader(args_.baselineMpi));

    std::vector<RedOp> ops = info_.hasOp ? args_.ops : std::vector<RedOp>{RedOp::kSum};
    std::vector<int> roots{-1};
    if (info_.hasRoot) {
      roots.clear();
      if (args_.root == BenchArgs::kAllRoots) {
        for (int r = 0; r < nranks_; ++r) roots.push_back(r);
      } else {
        roots.push_back(args_.root);
      }
    }
    for (DataType type : args_.types) {
      for (RedOp op : ops) {
        for (int root : roots) {
          for (uint64_t size : args_.sizes()) runSize(size, type, op, root);
        }
      }
    }
    double avgBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0;
    placementNow();
    placement_.endNs = lastPlacementNs_;
    if (!rows_.empty()) rows_.back().placementAfterNs = lastPlacementNs_;
    if (rank_ == 0) {
      print(formatFooter(wrongTotal_, avgBusBw));
      if (lastPlacementNs_ >= 0) {
        print(fmt::format("# Placement after the run: ranks 0 and 1 {} ({:.0f} ns round trip)\n",
                          placementClass(lastPlacementNs_), lastPlacementNs_));
      }
      if (!args_.outputFile.empty()) writeJson(avgBusBw);
    }
    // A launcher stops the job when any rank exits non-zero (as all do when something was
    // wrong): keep the others until rank 0 has written everything.
    world_.helper().barrier();
    return wrongTotal_;
  }

 private:
  void checkRoot() const {
    if (!info_.hasRoot || args_.root == BenchArgs::kAllRoots) return;
    BRAID_ENFORCE(args_.root < nranks_, ErrorCode::kInvalidUsage,
                  "rank {}: -r/--root {} is not a rank of this {}-rank job", rank_, args_.root,
                  nranks_);
  }

  void printPreamble() {
    std::string mine = formatDeviceLine(rank_, static_cast<int>(getpid()), hostName(),
                                        target_.deviceNumber(), target_.deviceLabel());
    std::vector<std::string> lines = world_.allGatherLines(mine);
    if (rank_ != 0) return;
    std::string text = formatParamsLine(args_.minBytes, args_.maxBytes, args_.stepBytes,
                                        args_.stepFactor, args_.warmupIters, args_.iters,
                                        args_.aggIters, args_.check, args_.threads);
    text += "#\n# Using devices\n";
    for (const auto& line : lines) text += line;
    text += fmt::format(
        "# braid {}: {} ranks{}, launcher {}, buffers on {}, transport {}, algo {}, {} API, time "
        "of {}\n",
        info_.name, nranks_, threadsNote(), world_.launcher(), target_.describe(), transportName(),
        algorithmName(args_.algorithm),
        args_.deviceCuda ? "stream-ordered"
        : args_.blocking ? "blocking"
                         : "non-blocking",
        averageName());
    if (placement_.startNs >= 0) {
      text += fmt::format(
          "# Placement: ranks 0 and 1 on CPUs {} and {}, cache-line round trip {:.0f} ns ({}); "
          "probed before every size (-J)\n",
          placement_.cpu0, placement_.cpu1, placement_.startNs, placementClass(placement_.startNs));
    }
    text += "#\n";
    print(text);
  }

  /// How the ranks are laid out when some are threads: " (2 processes x 2 threads)".
  std::string threadsNote() const {
    if (args_.threads == 1) return "";
    return fmt::format(" ({} process{} x {} threads)", nranks_ / args_.threads,
                       nranks_ / args_.threads == 1 ? "" : "es", args_.threads);
  }

  std::string transportName() const { return args_.transport.empty() ? "auto" : args_.transport; }

  const char* averageName() const {
    switch (args_.average) {
      case Average::kRank0:
        return "rank 0";
      case Average::kMean:
        return "mean over ranks";
      case Average::kMin:
        return "min over ranks";
      case Average::kMax:
        return "max over ranks";
    }
    return "?";
  }

  OpArgs opArgs(const void* send, void* recv, size_t count, DataType type, RedOp op,
                int root) const {
    return OpArgs{send, recv, count, type, op, root};
  }

  /// Seconds per op of `iters` back-to-back ops after a barrier, on this rank.
  double timeOps(const OpArgs& op) {
    world_.helper().barrier();
    return target_.timeOps(op, args_.iters);
  }

  /// Fills `count` elements at `p` through the target's host view, then uploads them.
  template <typename Fill>
  void fillAt(void* p, size_t count, DataType type, Fill&& fill) {
    fill(target_.hostView(p));
    target_.upload(p, count * dataTypeSize(type));
  }

  Measurement measure(double seconds, size_t bytes) {
    Measurement m;
    m.timeUs = seconds * 1e6;
    m.algBw = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0;
    m.busBw = m.algBw * info_.busFactor(nranks_);
    m.checked = args_.check;
    busBwSum_ += m.busBw;
    ++busBwCount_;
    return m;
  }

  /// Times one placement, then (with -c 1) reruns it once on fresh data and checks the result.
  Measurement runPlacement(const CheckSpec& spec, void* send, void* recv, void* poisonBase,
                           size_t poisonCount) {
    const Counts& c = spec.counts;
    const OpArgs op = opArgs(send, recv, c.paramCount, spec.type, spec.op, spec.root);
    auto fillSendHere = [&] {
      fillAt(send, c.sendCount, spec.type, [&](void* host) { fillSend(spec, host); });
    };
    fillSendHere();
    double seconds = timeOps(op);
    seconds = world_.combineTime(seconds, args_.average);
    Measurement m = measure(seconds, c.bytes);
    if (args_.check) {
      fillAt(poisonBase, poisonCount, spec.type,
             [&](void* host) { fillPoison(host, spec.type, poisonCount); });
      fillSendHere();
      target_.runOnce(op);
      target_.download(recv, c.recvCount * dataTypeSize(spec.type));
      m.wrong = world_.sumOverRanks(countWrong(spec, target_.hostView(recv)));
      wrongTotal_ += m.wrong;
    }
    return m;
  }

  /// Probes the placement (ranks 0 and 1 together, after a barrier); the figure on rank 0.
  void placementNow() {
    world_.helper().barrier();
    lastPlacementNs_ = probe_->measure();
  }

  void runSize(uint64_t size, DataType type, RedOp op, int root) {
    const size_t es = dataTypeSize(type);
    placementNow();
    if (!rows_.empty()) rows_.back().placementAfterNs = lastPlacementNs_;
    const double placementBefore = lastPlacementNs_;
    CheckSpec spec;
    spec.coll = &info_;
    spec.counts = info_.counts(size, es, nranks_);
    spec.rank = rank_;
    spec.nranks = nranks_;
    spec.root = info_.hasRoot ? root : 0;
    spec.type = type;
    spec.op = op;
    spec.seed = args_.seed;
    const Counts& c = spec.counts;

    Row row;
    row.bytes = c.bytes;
    row.count = c.paramCount;
    row.type = dataTypeName(type);
    row.op = info_.hasOp ? redOpName(op) : "none";
    row.root = info_.hasRoot ? root : -1;

    const OpArgs warm = opArgs(send_, recv_, c.paramCount, type, op, spec.root);
    // As nccl-tests warms up: -w ops issued back to back as the timed ones are (non-blocking:
    // all issued, then all waited for), so the timed batch finds what a batch needs ready.
    if (args_.warmupIters > 0) target_.timeOps(warm, args_.warmupIters);
    row.outOfPlace = runPlacement(spec, send_, recv_, recv_, c.recvCount);
    void* base = recv_;
    void* inSend = offsetBy(base, c.sendInPlaceOffset * rank_, es);
    void* inRecv = offsetBy(base, c.recvInPlaceOffset * rank_, es);
    row.inPlace = runPlacement(spec, inSend, inRecv, base, std::max(c.sendCount, c.recvCount));

    if (args_.baselineMpi) {
      fillSend(spec, send_);
      auto seconds = world_.timeMpi(info_, c, type, op, spec.root, send_, recv_, args_.warmupIters,
                                    args_.iters, args_.average);
      Baseline b;
      if (seconds) {
        b.available = true;
        b.timeUs = *seconds * 1e6;
        b.busBw = *seconds > 0 ? c.bytes / 1e9 / *seconds * info_.busFactor(nranks_) : 0;
      }
      row.baseline = b;
    }
    if (rank_ == 0) {
      print(formatRow(row));
      ReportRow report{row, "", placementBefore, -1};
      try {
        report.algoChosen = algorithmName(
            world_.comm().chosenAlgorithm(info_.kind, c.bytes, args_.registration != 0));
      } catch (const Error&) {
        // The tuner's choice is a nicety of the JSON; the run itself succeeded.
      }
      rows_.push_back(std::move(report));
    }
  }

  void writeJson(double avgBusBw) {
    RunInfo info;
    info.collective = info_.name;
    info.ranks = nranks_;
    info.launcher = world_.launcher();
    info.host = hostName();
    info.date = utcNow();
    info.transport = transportName();
    info.algo = algorithmName(args_.algorithm);
    info.args = args_;
    info.placement = placement_;
    writeReport(args_.outputFile, makeReport(info, rows_, wrongTotal_, avgBusBw));
  }

  const BenchArgs& args_;
  const CollInfo& info_;
  World& world_;
  Target& target_;
  const int rank_;
  const int nranks_;
  void* send_ = nullptr;  // owned by target_
  void* recv_ = nullptr;
  int64_t wrongTotal_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  std::vector<ReportRow> rows_;
  std::unique_ptr<PlacementProbe> probe_;
  double lastPlacementNs_ = -1;
  PlacementInfo placement_;
};

std::string baseName(const char* path) {
  std::string name = path ? path : "perf";
  auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

/// Every process must run as many threads (their ranks would not add up otherwise): a clear
/// error on every process instead of a collective mismatch later. Collective over processes.
void checkSameThreads(World& process, int threads) {
  if (process.size() == 1) return;
  const std::vector<std::string> all = process.allGatherLines(std::to_string(threads));
  for (int p = 0; p < process.size(); ++p) {
    BRAID_ENFORCE(all[p] == all[process.rank()], ErrorCode::kInvalidUsage,
                  "-t/--nthreads {} here, {} on process rank {}: every process must pass the same",
                  threads, all[p], p);
  }
}

/// One rank's whole run, the same whether the rank is a process or a thread (-t): its buffers,
/// the sweep, the table on rank 0. Returns 1 when an element was wrong, else 0.
int runRank(const BenchArgs& args, const CollRunner& runner, World& world, const Options& options) {
  std::unique_ptr<Target> target =
      args.deviceCuda ? makeCudaTarget(world, runner.info, options)
                      : makeHostTarget(world, runner, args.blocking, defaultTimeoutSeconds(),
                                       args.registration != 0);
  Bench bench(args, runner, world, *target);
  const int64_t wrong = bench.run();
  // run() ended in a barrier of every rank, each past its last op: so the target frees its
  // buffers (cudaFree) when no rank, thread of this process or not, has a collective in flight.
  return wrong > 0 ? 1 : 0;
}

}  // namespace

int benchMain(int argc, char** argv, const CollRunner& runner) {
  const std::string program = baseName(argc > 0 ? argv[0] : nullptr);
  const bool leader = rankFromEnvironment() == 0;
  BenchArgs args;
  try {
    args = parseArgs(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& e) {
    if (leader) std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 2;
  }
  if (args.help) {
    if (leader) print(usage(program));
    return 0;
  }
  auto reportError = [&](int rank, const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    std::fprintf(stderr, "%s: rank %d: %s: %s\n", program.c_str(), rank,
                 error ? errorCodeName(error->code()) : "error", e.what());
    std::fflush(stderr);
  };
  if (args.deviceCuda && args.threads > 1) {
    // Thread ranks share one CUDA context, and each has two streams (its own and its
    // communicator's); with the default 8 hardware queues, streams share queues and one rank's
    // stream wait can hold a peer's collective queued behind it. Before CUDA starts; a value the
    // user set wins.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  }
  std::unique_ptr<World> world;
  try {
    Options options;
    options.algorithm = args.algorithm;
    options.transport = args.transport;
    world = World::join(options, args.baselineMpi);
    checkSameThreads(*world, args.threads);
    auto rankMain = [&](World& rankWorld) { return runRank(args, runner, rankWorld, options); };
    int code;
    if (args.threads == 1) {
      code = rankMain(*world);
    } else {
      std::optional<int> threadsCode =
          runThreadRanks(*world, args.threads, options, program, rankMain, reportError);
      if (!threadsCode) return 1;  // each failed rank said why
      code = *threadsCode;
    }
    world->finish();
    return code;
  } catch (const std::exception& e) {
    reportError(world ? world->rank() : rankFromEnvironment(), e);
    return 1;
  }
}

}  // namespace braid::bench
