// How a *_perf process joins its job (braidrun/torchrun variables, mpirun, or alone) and the few
// cross-rank helpers the driver needs besides the collective under test.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/perf/args.h"
#include "bench/format/colls.h"
#include "braid/braid.hpp"

namespace braid::bench {

/// True when this process was started by mpirun (Open MPI / PMIx variables set).
bool launchedByMpirun();
/// This process's rank as the launcher's variables say (0 when none); for deciding who prints
/// before the communicator exists.
int rankFromEnvironment();
/// This process's rank on its host as the launcher's variables say (LOCAL_RANK, Open MPI's,
/// MPICH's; 0 when none): which GPU it takes, and its device number in the preamble.
int localRank();

/// The job as seen from one rank. Not thread-safe.
class World {
 public:
  /// Joins: under mpirun (built with MPI) MPI_Init, rank 0 makes a UniqueId and MPI_Bcasts it,
  /// then fromUniqueId(); with RANK/WORLD_SIZE set, Communicator::fromEnvironment(); otherwise a
  /// one-rank communicator. Throws kInvalidUsage when mpirun launched a build without MPI or when
  /// `needMpi` and MPI is not active.
  static std::unique_ptr<World> join(const Options& options, bool needMpi);
  /// One rank that is a thread of this process (-t): joins the job of `id` (from
  /// shareUniqueId() of the process's World) as `rank` of `size`. Its helpers use braid, never
  /// MPI (MPI's ranks are the processes). Collective over the job's ranks.
  static std::unique_ptr<World> joinThread(const UniqueId& id, int rank, int size,
                                           const std::string& launcher, const Options& options);
  ~World();

  /// A fresh unique id made by rank 0 and handed to every rank over helper(). Collective.
  UniqueId shareUniqueId();

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The communicator under test (with the asked --algo).
  Communicator& comm() { return *comm_; }
  /// The communicator for the bench's own collectives (barriers, time and wrong-count
  /// reductions): comm() itself unless --algo or BRAID_ALGO forces an algorithm, then a second
  /// one forced to ring, since a forced algorithm may not implement all-reduce.
  Communicator& helper() { return helper_ ? *helper_ : *comm_; }
  /// "mpirun", "braidrun", "env" (RANK/WORLD_SIZE without braidrun) or "single".
  const std::string& launcher() const { return launcher_; }
  bool mpiActive() const { return mpiActive_; }

  /// Combines per-rank seconds as -a says (rank 0's, mean, min or max), with MPI when active,
  /// else with braid's allReduce. Collective.
  double combineTime(double seconds, Average how);
  /// Sum of `value` over ranks. Collective.
  int64_t sumOverRanks(int64_t value);
  /// Every rank's `line` (truncated to 255 bytes), in rank order. Collective.
  std::vector<std::string> allGatherLines(const std::string& line);
  /// Call on success before destruction: finalizes MPI (skipped after an error so a rank never
  /// blocks in MPI_Finalize beside a peer that died).
  void finish();

  /// Seconds per op of the MPI collective matching `coll` on the same buffers (after `warmup`
  /// runs and a barrier), combined as `how`; nullopt where MPI has no equivalent (reductions on
  /// half and bfloat16). Requires mpiActive(). Collective.
  std::optional<double> timeMpi(const CollInfo& coll, const Counts& counts, DataType type, RedOp op,
                                int root, const void* send, void* recv, int warmup, int iters,
                                Average how);

 private:
  World() = default;
  /// Joins with the launcher's mechanism; sets launcher_ and mpiActive_.
  std::unique_ptr<Communicator> joinFirst(const Options& options, bool needMpi);
  /// Takes `first` (made with firstOptions()) as this rank's communicator, or as the helper of
  /// a second one made with `options` when an algorithm is forced. Collective.
  void adopt(std::unique_ptr<Communicator> first, const Options& options);
  int rank_ = 0;
  int size_ = 1;
  std::string launcher_ = "single";
  bool mpiActive_ = false;
  bool finished_ = false;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> helper_;
};

}  // namespace braid::bench
