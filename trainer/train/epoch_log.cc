#include "trainer/train/epoch_log.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace braid::trainer {

namespace {

/// The monitor's fields derived from an epoch's StepTimes, in the logs' column order.
struct MonitorFields {
  const char* name;
  double value;
};

std::vector<MonitorFields> monitorFields(const StepTimes& t, double epochSeconds) {
  return {{"step_seconds", t.stepSeconds},
          {"compute_seconds", t.computeSeconds},
          {"comm_wait_seconds", t.waitSeconds},
          {"overlap_seconds", t.overlapSeconds},
          {"compute_share", t.share(t.computeSeconds)},
          {"overlap_share", t.share(t.overlapSeconds)},
          {"allreduce_bytes", static_cast<double>(t.allReduceBytes)},
          {"allreduce_bytes_per_s",
           epochSeconds > 0 ? static_cast<double>(t.allReduceBytes) / epochSeconds : 0.0}};
}

/// The CSV header's monitor columns, from monitorFields' names.
std::string monitorColumns() {
  std::string out;
  for (const MonitorFields& f : monitorFields(StepTimes{}, 0)) {
    out += out.empty() ? "" : ",";
    out += f.name;
  }
  return out;
}

}  // namespace

std::string formatEpoch(const EpochStats& s, int epochs) {
  std::string fp16;
  if (s.fp16) fp16 = fmt::format("  skipped {}  loss scale {:g}", s.skippedSteps, s.lossScale);
  std::string monitor;
  if (s.times) {
    const StepTimes& t = *s.times;
    monitor =
        fmt::format("  compute {:.1f}%  overlap {:.1f}%  all-reduce {:.1f} MB/s",
                    100 * t.share(t.computeSeconds), 100 * t.share(t.overlapSeconds),
                    s.seconds > 0 ? static_cast<double>(t.allReduceBytes) / s.seconds / 1e6 : 0.0);
  }
  return fmt::format(
      "epoch {}/{}  train loss {:.4f}  train acc {:.2f}%  test acc {:.2f}%  samples/s {:.0f}  "
      "comm wait {:.1f}%{}  ({:.1f} s){}{}",
      s.epoch, epochs, s.trainLoss, 100 * s.trainAcc, 100 * s.testAcc, s.samplesPerSec,
      100 * s.commWaitShare, monitor, s.seconds, fp16, s.extraConsole);
}

std::string runInfoJson(const TrainOptions& o, double lr, int ranks, int threads, size_t numParams,
                        const std::string& extraJson) {
  nlohmann::json j = {{"strategy", o.strategy},
                      {"model", o.model},
                      {"optimizer", o.optimizer},
                      {"lr", lr},
                      {"epochs", o.epochs},
                      {"global_batch", o.batch},
                      {"ranks", ranks},
                      {"seed", o.seed},
                      {"threads_per_rank", threads},
                      {"params", numParams}};
  j.update(nlohmann::json::parse(extraJson));
  return j.dump();
}

EpochStats epochStatsFromSums(int epoch, int64_t steps, const BatchSums& sums, double epochSeconds,
                              double stepSeconds, double waitSeconds) {
  EpochStats s;
  s.epoch = epoch;
  s.steps = steps;
  s.trainLoss = sums.meanLoss();
  s.trainAcc = sums.samples > 0 ? sums.correct / sums.samples : 0.0;
  s.samplesPerSec = epochSeconds > 0 ? sums.samples / epochSeconds : 0.0;
  s.commWaitShare = stepSeconds > 0 ? waitSeconds / stepSeconds : 0.0;
  s.seconds = epochSeconds;
  return s;
}

EpochLog::EpochLog(std::string path, std::string runInfoJson)
    : path_(std::move(path)),
      runInfoJson_(std::move(runInfoJson)),
      json_(path_.size() >= 5 && path_.compare(path_.size() - 5, 5, ".json") == 0) {
  std::ofstream out(path_, std::ios::trunc);
  BRAID_ENFORCE(out.good(), ErrorCode::kSystemError, "cannot write the log file '{}'", path_);
  if (!json_) {
    out << "epoch,steps,train_loss,train_acc,test_acc,samples_per_s,comm_wait_share,seconds,"
           "skipped_steps,loss_scale,"
        << monitorColumns() << "\n";
  }
}

void EpochLog::add(const EpochStats& s) {
  rows_.push_back(s);
  if (!json_) {
    std::ofstream out(path_, std::ios::app);
    out << fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.1f},{:.6f},{:.3f},{},{:g}", s.epoch, s.steps,
                       s.trainLoss, s.trainAcc, s.testAcc, s.samplesPerSec, s.commWaitShare,
                       s.seconds, s.skippedSteps, s.lossScale);
    if (s.times) {
      for (const MonitorFields& f : monitorFields(*s.times, s.seconds))
        out << fmt::format(",{:.12g}", f.value);
    } else {
      out << std::string(monitorFields(StepTimes{}, 0).size(), ',');
    }
    out << "\n";
    BRAID_ENFORCE(out.good(), ErrorCode::kSystemError, "cannot append to the log file '{}'", path_);
    return;
  }
  nlohmann::json doc;
  doc["run"] = nlohmann::json::parse(runInfoJson_);
  doc["epochs"] = nlohmann::json::array();
  for (const EpochStats& r : rows_) {
    nlohmann::json row = {{"epoch", r.epoch},
                          {"steps", r.steps},
                          {"train_loss", r.trainLoss},
                          {"train_acc", r.trainAcc},
                          {"test_acc", r.testAcc},
                          {"samples_per_s", r.samplesPerSec},
                          {"comm_wait_share", r.commWaitShare},
                          {"seconds", r.seconds},
                          {"skipped_steps", r.skippedSteps},
                          {"loss_scale", r.lossScale}};
    for (const MonitorFields& f : monitorFields(r.times.value_or(StepTimes{}), r.seconds)) {
      row[f.name] = r.times ? nlohmann::json(f.value) : nlohmann::json(nullptr);
    }
    if (!r.extraJson.empty()) row.update(nlohmann::json::parse(r.extraJson));
    doc["epochs"].push_back(row);
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(2) << "\n";
    BRAID_ENFORCE(out.good(), ErrorCode::kSystemError, "cannot write the log file '{}'", tmp);
  }
  BRAID_ENFORCE(std::rename(tmp.c_str(), path_.c_str()) == 0, ErrorCode::kSystemError,
                "cannot rename '{}' to '{}'", tmp, path_);
}

}  // namespace braid::trainer
