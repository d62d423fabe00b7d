// Command-line flags of the *_perf binaries: nccl-tests' flags, plus braid's --device, --algo,
// --transport and --baseline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/braid.hpp"

namespace braid::bench {

/// How per-rank times are combined into the reported time (nccl-tests' -a).
enum class Average : int { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

/// Everything the flags say; defaults are nccl-tests' defaults.
struct BenchArgs {
  uint64_t minBytes = 32ull << 20;  ///< -b
  uint64_t maxBytes = 32ull << 20;  ///< -e
  uint64_t stepBytes = 1ull << 20;  ///< -i
  uint64_t stepFactor = 1;          ///< -f (wins over -i when > 1)
  int iters = 20;                   ///< -n
  int warmupIters = 5;              ///< -w
  int aggIters = 1;                 ///< -m (must be 1)
  /// -t: ranks per process, run as threads of it (one communicator each; with --device cuda
  /// they share the process's GPU context). Ranks: processes x threads.
  int threads = 1;
  bool check = true;                                ///< -c
  std::vector<RedOp> ops{RedOp::kSum};              ///< -o (all = every op)
  std::vector<DataType> types{DataType::kFloat32};  ///< -d (all = every type)
  std::string opName = "sum";                       ///< -o as given (for the JSON)
  std::string typeName = "float";                   ///< -d as given (for the JSON)
  int root = 0;                                     ///< -r; kAllRoots = every rank in turn
  bool blocking = false;                   ///< -z 1: blocking API; 0: non-blocking API + wait
  Average average = Average::kMean;        ///< -a
  std::string outputFile;                  ///< -J: JSON output ("" = none)
  Algorithm algorithm = Algorithm::kAuto;  ///< --algo
  std::string transport;                   ///< --transport ("" = braid's choice)
  bool baselineMpi = false;                ///< --baseline mpi
  bool deviceCuda = false;                 ///< --device cuda: device buffers, DeviceCommunicator
  /// -R 1 or 2 (nccl-tests' local / symmetric registration): host buffers from braid::memAlloc,
  /// which peers on this host map (the mapped single copy); 0: ordinary memory
  int registration = 0;
  bool help = false;       ///< -h
  uint64_t seed = 0x5eed;  ///< --seed: validation data seed

  static constexpr int kAllRoots = -1;

  /// The sizes swept, as nccl-tests: minBytes, then *stepFactor (when > 1) or +stepBytes, up to
  /// maxBytes inclusive.
  std::vector<uint64_t> sizes() const;
};

/// Parses argv[1..] (program name excluded). Accepts "-b 8", "-b8", "--minbytes 8",
/// "--minbytes=8"; sizes take K/M/G suffixes. Throws braid::Error(kInvalidUsage) with a message
/// naming the flag and the bad value.
BenchArgs parseArgs(const std::vector<std::string>& argv);

/// The usage text printed by -h.
std::string usage(const std::string& program);

}  // namespace braid::bench
