#include "trainer/ps/epoch_collector.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace braid::trainer::ps {

void WorkerEpoch::toStats(double (&s)[8]) const {
  const double v[8] = {train.lossTimesSamples,
                       train.correct,
                       train.samples,
                       testCorrect,
                       testSeen,
                       seconds,
                       waitSeconds,
                       computeSeconds};
  std::copy(v, v + 8, s);
}

WorkerEpoch WorkerEpoch::fromStats(const double (&s)[8]) {
  return WorkerEpoch{{s[0], s[1], s[2]}, s[3], s[4], s[5], s[6], s[7]};
}

void StalenessStats::add(int64_t staleness, bool wasApplied) {
  if (!wasApplied) {
    ++rejected;
    return;
  }
  ++applied;
  sum += staleness;
  max = std::max(max, staleness);
}

void EpochCollector::report(int worker, int epoch, const WorkerEpoch& w) {
  epochs_[epoch].reports[worker] = w;
}

std::vector<EpochStats> EpochCollector::takeComplete() {
  std::vector<EpochStats> out;
  for (;;) {
    auto it = epochs_.find(next_);
    if (it == epochs_.end()) break;
    const Epoch& e = it->second;
    bool complete = true;
    for (int w = 0; w < workers_; ++w) {
      if (!e.reports.count(w) && !lost_.count(w)) complete = false;
    }
    if (!complete || e.reports.empty()) break;
    WorkerEpoch sum;
    StepTimes times;  // summed over the workers
    for (const auto& [worker, r] : e.reports) {
      sum.train += r.train;
      sum.testCorrect += r.testCorrect;
      sum.testSeen += r.testSeen;
      sum.seconds = std::max(sum.seconds, r.seconds);  // the workers run side by side
      times.stepSeconds += r.seconds;
      times.computeSeconds += r.computeSeconds;
      times.waitSeconds += r.waitSeconds;
    }
    times.steps = e.steps;
    times.samples = static_cast<int64_t>(sum.train.samples);
    EpochStats s = epochStatsFromSums(next_ + 1, e.steps, sum.train, sum.seconds, times.stepSeconds,
                                      times.waitSeconds);
    s.times = times;
    s.testAcc = sum.testSeen > 0 ? sum.testCorrect / sum.testSeen : 0.0;
    const StalenessStats& st = e.staleness;
    s.extraConsole = fmt::format("  staleness mean {:.2f} max {}  rejected {}  workers {}",
                                 st.mean(), st.max, st.rejected, e.reports.size());
    s.extraJson =
        nlohmann::json{{"staleness_mean", st.mean()},           {"staleness_max", st.max},
                       {"gradients_applied", st.applied},       {"gradients_rejected", st.rejected},
                       {"workers_reporting", e.reports.size()}, {"test_samples", sum.testSeen}}
            .dump();
    out.push_back(std::move(s));
    ++next_;
  }
  return out;
}

}  // namespace braid::trainer::ps
