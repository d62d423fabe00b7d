// The performance monitor: the step and epoch timing fields of braid-train's logs (--log,
// --log-steps) and --report scaling.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/trainer/support/train_runs.h"
#include "trainer/train/scaling_log.h"
#include "trainer/train/scaling_report.h"

namespace {

using namespace braid::trainer::testruns;  // NOLINT(google-build-using-namespace)
using braid::trainer::formatScalingTable;
using braid::trainer::scalingLogText;
using braid::trainer::ScalingRow;
using braid::trainer::scalingRowFromLog;
using nlohmann::json;

constexpr int64_t kMlpParams = 235146;  // 784*256+256 + 256*128+128 + 128*10+10
constexpr int kSteps = 12;
const std::string kBase =
    "--model mlp --batch 64 --epochs 1 --limit-train 2048 --limit-test 200 --max-steps " +
    std::to_string(kSteps) + " ";

std::vector<json> readLines(const std::string& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

json readJson(const std::string& file) {
  std::ifstream in(file);
  return json::parse(in);
}

// The parts of a step are disjoint intervals of the same steady clock inside the step, so their
// sum can exceed the step only by rounding: no load on the machine can break these.
constexpr double kClockSlack = 1e-6;

void expectStepConsistent(const json& s, int64_t bytes) {
  SCOPED_TRACE(s.dump());
  const double seconds = s["seconds"], compute = s["compute_seconds"];
  const double wait = s["comm_wait_seconds"], overlap = s["overlap_seconds"];
  EXPECT_GT(compute, 0);
  EXPECT_GE(wait, 0);
  EXPECT_LE(compute + wait, seconds + kClockSlack);
  EXPECT_LE(overlap, compute + kClockSlack);
  EXPECT_EQ(s["allreduce_bytes"].get<int64_t>(), bytes);
  EXPECT_EQ(s["samples"].get<int64_t>(), 64);
  EXPECT_NEAR(s["samples_per_s"].get<double>(), 64 / seconds, 1e-6 * 64 / seconds);
}

// The epoch's fields are the sums of its steps' and the shares follow from them.
void expectEpochMatchesSteps(const json& e, const std::vector<json>& steps) {
  double seconds = 0, compute = 0, wait = 0, overlap = 0;
  int64_t bytes = 0;
  for (const json& s : steps) {
    seconds += s["seconds"].get<double>();
    compute += s["compute_seconds"].get<double>();
    wait += s["comm_wait_seconds"].get<double>();
    overlap += s["overlap_seconds"].get<double>();
    bytes += s["allreduce_bytes"].get<int64_t>();
  }
  EXPECT_EQ(e["steps"].get<int64_t>(), static_cast<int64_t>(steps.size()));
  EXPECT_NEAR(e["step_seconds"].get<double>(), seconds, 1e-9);
  EXPECT_NEAR(e["compute_seconds"].get<double>(), compute, 1e-9);
  EXPECT_NEAR(e["comm_wait_seconds"].get<double>(), wait, 1e-9);
  EXPECT_NEAR(e["overlap_seconds"].get<double>(), overlap, 1e-9);
  EXPECT_EQ(e["allreduce_bytes"].get<int64_t>(), bytes);
  EXPECT_NEAR(e["compute_share"].get<double>(), compute / seconds, 1e-9);
  EXPECT_NEAR(e["overlap_share"].get<double>(), overlap / seconds, 1e-9);
  EXPECT_NEAR(e["comm_wait_share"].get<double>(), wait / seconds, 1e-9);
  EXPECT_NEAR(e["allreduce_bytes_per_s"].get<double>(), bytes / e["seconds"].get<double>(),
              1e-6 * bytes / e["seconds"].get<double>());
  EXPECT_LE(seconds, e["seconds"].get<double>());  // the steps are inside the epoch's time
}

class Monitor : public TrainRunTest {};

// 0.25 MiB buckets: the MLP's gradients go in 5 all-reduces, the first started after fc3's
// backward, so fc2's and fc1's backward run with it in flight: overlap > 0 on every step. Every
// step all-reduces each gradient exactly once: 235,146 x 4 bytes.
TEST_F(Monitor, ManyBucketsOverlapAndEveryGradientIsAllReducedOnce) {
  const RunResult r = run(trainCommand(2, kBase + "--bucket-mb 0.25 --log " + path("run.json") +
                                              " --log-steps " + path("steps.jsonl")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("overlap "), std::string::npos) << r.output;
  const std::vector<json> steps = readLines(path("steps.jsonl"));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
    expectStepConsistent(steps[i], kMlpParams * 4);
    EXPECT_GT(steps[i]["overlap_seconds"].get<double>(), 0) << steps[i].dump();
  }
  const json doc = readJson(path("run.json"));
  EXPECT_EQ(doc["run"]["buckets"].get<int>(), 5);
  expectEpochMatchesSteps(doc["epochs"][0], steps);
}

// One bucket (the default 25 MiB) starts only when backward is over and is waited for before
// the optimizer runs: nothing can overlap, and the monitor says exactly 0. The CSV keeps its old
// columns first and appends the monitor's.
TEST_F(Monitor, OneBucketOverlapsNothingAndCsvAppendsColumns) {
  const RunResult r = run(
      trainCommand(2, kBase + "--log " + path("run.csv") + " --log-steps " + path("steps.jsonl")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::vector<json> steps = readLines(path("steps.jsonl"));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (const json& s : steps) {
    expectStepConsistent(s, kMlpParams * 4);
    EXPECT_EQ(s["overlap_seconds"].get<double>(), 0.0) << s.dump();
  }
  std::ifstream csv(path("run.csv"));
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  EXPECT_EQ(header,
            "epoch,steps,train_loss,train_acc,test_acc,samples_per_s,comm_wait_share,seconds,"
            "skipped_steps,loss_scale,step_seconds,compute_seconds,comm_wait_seconds,"
            "overlap_seconds,compute_share,overlap_share,allreduce_bytes,allreduce_bytes_per_s");
  std::vector<std::string> cells;
  std::stringstream cellStream(row);
  for (std::string c; std::getline(cellStream, c, ',');) cells.push_back(c);
  ASSERT_EQ(cells.size(), 18u) << row;
  EXPECT_EQ(std::stod(cells[13]), 0.0);  // overlap_seconds
  EXPECT_EQ(std::stoll(cells[16]), kSteps * kMlpParams * 4);
}

// fp16 all-reduces half the bytes, plus the int32 overflow flag the ranks agree on.
TEST_F(Monitor, Fp16AllReducesHalfTheBytes) {
  const RunResult r =
      run(trainCommand(1, kBase + "--precision fp16 --log-steps " + path("steps.jsonl")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::vector<json> steps = readLines(path("steps.jsonl"));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (const json& s : steps) expectStepConsistent(s, kMlpParams * 2 + 4);
}

// The pipeline fills the same fields (its stage all-reduce among replicas is waited at once:
// overlap 0); 2 stages x 2 replicas all-reduce stage 0's gradients.
TEST_F(Monitor, PipelineLogsTheSameFields) {
  const RunResult r =
      run(trainCommand(4, kBase + "--strategy pipeline --stages 2 --micro-batches 2 --log " +
                              path("run.json") + " --log-steps " + path("steps.jsonl")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::vector<json> steps = readLines(path("steps.jsonl"));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (const json& s : steps) {
    EXPECT_GT(s["allreduce_bytes"].get<int64_t>(), 0);
    EXPECT_LT(s["allreduce_bytes"].get<int64_t>(), kMlpParams * 4);  // one stage's share
    expectStepConsistent(s, steps[0]["allreduce_bytes"].get<int64_t>());
    EXPECT_EQ(s["overlap_seconds"].get<double>(), 0.0);
  }
  expectEpochMatchesSteps(readJson(path("run.json"))["epochs"][0], steps);
}

TEST_F(Monitor, BadFlagsAreRefused) {
  const auto expectError = [&](const std::string& args, const std::string& message) {
    const RunResult r = run(trainCommand(1, args));
    EXPECT_EQ(r.exitCode, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  };
  expectError("--report speed", "--report 'speed' is unknown; use scaling");
  expectError("--report-ranks 1,2", "--report-ranks and --braidrun need --report scaling");
  expectError("--report scaling --report-ranks 2,1", "--report-ranks 2,1 must be positive");
  expectError("--report scaling --report-ranks 0,1", "--report-ranks 0,1 must be positive");
  expectError("--report scaling --batch 64 --report-ranks 1,3",
              "--report scaling on 3 rank(s): --batch 64");
  expectError("--report scaling --braidrun /nonexistent/braidrun",
              "--braidrun '/nonexistent/braidrun' is not an executable file");
  expectError("--strategy ps --ps 1 --log-steps " + path("s.jsonl"),
              "--log-steps is for --strategy ddp or pipeline");
  expectError("--log-steps /nonexistent-dir/s.jsonl " + kBase,
              "cannot write the step log '/nonexistent-dir/s.jsonl'");
  expectError("--report scaling --log /nonexistent-dir/s.json " + kBase,
              "cannot write the scaling log '/nonexistent-dir/s.json'");
}

// The table's rows come from the runs' logs: 1 rank is the baseline (speedup 1.00x, 100%);
// --log keeps the table (the runs' own logs are the report's).
TEST_F(Monitor, ReportScalingPrintsOneAndTwoRanks) {
  const RunResult r = run(
      trainCommand(1, kBase + "--report scaling --report-ranks 1,2 --log " + path("scaling.json")),
      120);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("ranks   samples/s   speedup  efficiency  comm share  overlap share"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\n    1  "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n    2  "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1.00x      100.0%"), std::string::npos) << r.output;
  const json log = readJson(path("scaling.json"));
  ASSERT_EQ(log["scaling"].size(), 2u) << log.dump();
  const json& one = log["scaling"][0];
  const json& two = log["scaling"][1];
  EXPECT_EQ(one["ranks"], 1);
  EXPECT_EQ(two["ranks"], 2);
  EXPECT_DOUBLE_EQ(one["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(one["efficiency"].get<double>(), 1.0);
  EXPECT_GT(two["samples_per_s"].get<double>(), 0);
  EXPECT_NEAR(two["speedup"].get<double>(),
              two["samples_per_s"].get<double>() / one["samples_per_s"].get<double>(), 1e-9);
  EXPECT_NEAR(two["efficiency"].get<double>(), two["speedup"].get<double>() / 2, 1e-9);
  EXPECT_TRUE(two["comm_share"].is_number()) << log.dump();
  EXPECT_TRUE(two["overlap_share"].is_number()) << log.dump();
}

// A run that fails is named by its rank count, with its own error from its stderr.
TEST_F(Monitor, ReportScalingNamesTheFailedRun) {
  const RunResult r = run(trainCommand(
      1, kBase + "--report scaling --report-ranks 1,2 --data " + path("no-such-data")));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("--report scaling: the 1-rank run failed (exit status 1)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no-such-data"), std::string::npos) << r.output;
}

TEST(ScalingTable, EfficiencyIsAgainstTheSmallestRun) {
  const std::vector<ScalingRow> rows = {{1, 1000, 0.01, 0}, {2, 1500, 0.2, 0.1}, {4, 2000, -1, -1}};
  const std::string table = formatScalingTable(rows);
  EXPECT_NE(table.find("    1        1000     1.00x      100.0%        1.0%           0.0%"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("    2        1500     1.50x       75.0%       20.0%          10.0%"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("    4        2000     2.00x       50.0%           -              -"),
            std::string::npos)
      << table;
}

// The log holds the table's figures; a run without monitor fields (ps) has null / empty shares.
TEST(ScalingTable, LogCarriesTheTablesFigures) {
  const std::vector<ScalingRow> rows = {{1, 1000, 0.01, 0}, {2, 1500, 0.2, 0.1}, {4, 2000, -1, -1}};
  const json doc = json::parse(scalingLogText(rows, /*json=*/true));
  ASSERT_EQ(doc["scaling"].size(), 3u);
  EXPECT_DOUBLE_EQ(doc["scaling"][1]["speedup"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(doc["scaling"][1]["efficiency"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(doc["scaling"][1]["comm_share"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(doc["scaling"][2]["efficiency"].get<double>(), 0.5);
  EXPECT_TRUE(doc["scaling"][2]["comm_share"].is_null());
  EXPECT_TRUE(doc["scaling"][2]["overlap_share"].is_null());
  EXPECT_EQ(scalingLogText(rows, /*json=*/false),
            "ranks,samples_per_s,speedup,efficiency,comm_share,overlap_share\n"
            "1,1000.0,1.000000,1.000000,0.010000,0.000000\n"
            "2,1500.0,1.500000,0.750000,0.200000,0.100000\n"
            "4,2000.0,2.000000,0.500000,,\n");
}

TEST(ScalingTable, RowSumsTheLogsEpochs) {
  const json doc = {{"run", json::object()},
                    {"epochs",
                     {{{"samples_per_s", 100.0},
                       {"seconds", 2.0},
                       {"step_seconds", 1.5},
                       {"comm_wait_seconds", 0.5},
                       {"overlap_seconds", 0.25}},
                      {{"samples_per_s", 300.0},
                       {"seconds", 2.0},
                       {"step_seconds", 1.5},
                       {"comm_wait_seconds", 0.25},
                       {"overlap_seconds", 0.5}}}}};
  const ScalingRow row = scalingRowFromLog(doc.dump(), 2, "x.json");
  EXPECT_EQ(row.ranks, 2);
  EXPECT_DOUBLE_EQ(row.samplesPerSec, 200.0);  // 800 samples in 4 s
  EXPECT_DOUBLE_EQ(row.commShare, 0.25);
  EXPECT_DOUBLE_EQ(row.overlapShare, 0.25);
  try {
    scalingRowFromLog("{\"epochs\": []}", 4, "y.json");
    FAIL() << "an empty log was accepted";
  } catch (const braid::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the log 'y.json' of the 4-rank run holds no epoch"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
