// Server 0's view of the epochs of a parameter-server run: every worker's epoch results and the
// staleness of the updates, turned into the trainer's EpochStats once the epoch is complete.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "trainer/train/epoch_log.h"

namespace braid::trainer::ps {

/// What one worker sends at the end of an epoch (PsHeader::stats).
struct WorkerEpoch {
  BatchSums train;         ///< of the worker's training samples
  double testCorrect = 0;  ///< on the worker's strided share of the test set, after a pull
  double testSeen = 0;
  double seconds = 0;      ///< training time of the epoch (evaluation excluded)
  double waitSeconds = 0;  ///< of which blocked on the servers
  /// of which in forward and backward (recomputations after a rejected push included)
  double computeSeconds = 0;

  void toStats(double (&stats)[8]) const;
  static WorkerEpoch fromStats(const double (&stats)[8]);
};

/// The staleness of the updates one server received from gradients of one epoch.
struct StalenessStats {
  int64_t applied = 0;
  int64_t rejected = 0;  ///< more than --max-staleness versions old: not applied
  int64_t sum = 0;       ///< over applied updates
  int64_t max = 0;       ///< over applied updates
  void add(int64_t staleness, bool wasApplied);
  double mean() const { return applied > 0 ? static_cast<double>(sum) / applied : 0.0; }
};

/// Collects epochs. An epoch is complete when every worker reported it or is gone; complete
/// epochs come out in order, each once.
class EpochCollector {
 public:
  explicit EpochCollector(int workers) : workers_(workers) {}
  void report(int worker, int epoch, const WorkerEpoch& w);
  /// A gradient of `epoch` arrived `staleness` versions late; applied, or rejected as too stale.
  void update(int epoch, int64_t staleness, bool applied) {
    epochs_[epoch].staleness.add(staleness, applied);
  }
  /// The server made one optimizer step (sync: one per average of all workers' gradients).
  void step(int epoch) { ++epochs_[epoch].steps; }
  void workerLost(int worker) { lost_.insert(worker); }
  /// The epochs (0-based) complete now that were not returned before, as EpochStats (steps:
  /// optimizer steps of server 0 from the epoch's gradients; seconds: the slowest worker's;
  /// comm wait: the workers' time blocked on the servers over their training time; the
  /// performance monitor's times summed over the workers: step = their training time, compute,
  /// wait, no overlap (a worker waits for its reply before its next batch) and no all-reduce;
  /// the staleness in extraConsole / extraJson).
  std::vector<EpochStats> takeComplete();

 private:
  struct Epoch {
    std::map<int, WorkerEpoch> reports;
    StalenessStats staleness;
    int64_t steps = 0;
  };
  int workers_;
  std::set<int> lost_;
  std::map<int, Epoch> epochs_;
  int next_ = 0;  // the first epoch not yet returned
};

}  // namespace braid::trainer::ps
