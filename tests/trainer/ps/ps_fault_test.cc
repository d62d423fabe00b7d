// braid-train --strategy ps when ranks die, and its checkpoints: a killed worker (async) leaves
// the others training; a killed server ends every rank with its name; --resume continues (sync:
// bit for bit like a run that never stopped; async: from the servers' agreed version).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/trainer/ps/ps_fixture.h"

namespace braid::trainer::testruns {
namespace {

namespace fs = std::filesystem;

class PsFaults : public PsRun {
 protected:
  /// An async job of 4 ranks (--ps `servers`) long enough to be killed in: 2 epochs of 30,000
  /// samples. braidrun runs with --settle never, as the README's async commands do, so it does
  /// not stop the survivors itself: what they do is braid-train's. `extra` adds flags.
  std::string asyncJob(int servers, const std::string& extra) const {
    return train(4,
                 "--strategy ps --mode async --ps " + std::to_string(servers) +
                     " --optimizer adam --batch 96 --limit-train 30000 --limit-test 300 "
                     "--epochs 2 --staleness-log " +
                     path("staleness.jsonl") + " " + extra,
                 "--settle never");
  }

  /// Each of `ranks` printed braid-train's error line (so it exited with status 1), and that
  /// line says `text`.
  static void expectEveryRankFailedSaying(const std::string& out, std::initializer_list<int> ranks,
                                          const std::string& text) {
    for (int rank : ranks) {
      std::string line = "[";
      line.append(std::to_string(rank)).append("] braid-train: error: rank ");
      line.append(std::to_string(rank));
      const size_t at = out.find(line);
      ASSERT_NE(at, std::string::npos) << "rank " << rank << " did not fail\n" << out;
      EXPECT_NE(out.substr(at, out.find('\n', at) - at).find(text), std::string::npos)
          << "rank " << rank << " does not say '" << text << "'\n"
          << out;
    }
  }

  /// Starts `command`, waits until its staleness log has `lines` lines, SIGKILLs rank `victim`
  /// and waits for the launcher (at most 60 s). Returns its exit code; the output is in `log`.
  int killRankMidRun(const std::string& command, int victim, size_t lines, const std::string& log,
                     double* secondsAfterKill) {
    const pid_t launcher = spawnLogged(command, log);
    EXPECT_GT(launcher, 0);
    if (launcher <= 0) return -1;
    const bool started = waitUntil([&] { return lineCount(path("staleness.jsonl")) >= lines; }, 60);
    const pid_t rank = rankProcess(launcher, victim);
    EXPECT_TRUE(started && rank > 0) << "the job never got going:\n" << readText(log);
    if (rank > 0) ::kill(rank, SIGKILL);
    const auto killedAt = std::chrono::steady_clock::now();
    const int code = waitExit(launcher, 60);
    *secondsAfterKill =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
    return code;
  }
};

TEST_F(PsFaults, AsyncKilledWorkerDoesNotStopTheOthers) {
  const std::string log = path("job.log"), json = path("run.json");
  double after = 0;
  const int code = killRankMidRun(
      asyncJob(1, "--log " + json + " --dump-params " + path("final.bin")), 3, 150, log, &after);
  const std::string out = readText(log);
  EXPECT_EQ(code, 128 + SIGKILL) << "braidrun reports the killed rank\n" << out;
  EXPECT_NE(out.find("server rank 0: worker rank 3 lost at version"), std::string::npos) << out;
  EXPECT_NE(out.find("going on with 2 worker(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("workers lost: 3"), std::string::npos) << "the run finished\n" << out;
  EXPECT_EQ(out.find("error"), std::string::npos) << "no survivor failed\n" << out;
  // Both epochs were logged, the second by the two workers left, and the parameters written.
  const auto doc = nlohmann::json::parse(readText(json));
  ASSERT_EQ(doc["epochs"].size(), 2u) << out;
  EXPECT_EQ(doc["epochs"][1]["workers_reporting"], 2);
  EXPECT_EQ(readFloats(path("final.bin")).size(), 235146u);
  EXPECT_GT(doc["epochs"][1]["test_acc"].get<double>(), 0.6);
}

// Sync mode needs every worker each step: a killed worker ends the job, every rank naming it.
TEST_F(PsFaults, SyncKilledWorkerEndsEveryRankNamingIt) {
  const std::string log = path("job.log");
  const std::string job = train(4,
                                "--strategy ps --ps 1 --optimizer adam --batch 96 "
                                "--limit-train 30000 --limit-test 300 --epochs 2 "
                                "--staleness-log " +
                                    path("staleness.jsonl"),
                                "--settle never");
  double after = 0;
  const int code = killRankMidRun(job, 2, 150, log, &after);
  const std::string out = readText(log);
  // braidrun exits with the first failure it reaps: the kill, or a survivor's error.
  EXPECT_TRUE(code == 128 + SIGKILL || code == 1) << code << "\n" << out;
  EXPECT_LT(after, 20) << out;
  expectEveryRankFailedSaying(out, {0, 1, 3}, "worker rank 2 is gone in --mode sync");
}

// A server killed: every other rank (the other server and both workers) exits with an error
// naming it, at once rather than at a timeout. Then --resume picks up the servers' checkpoints.
TEST_F(PsFaults, AsyncKilledServerEndsEveryRankNamingItThenResumeContinues) {
  const std::string log = path("job.log"), ck = path("ck");
  double after = 0;
  const int code = killRankMidRun(asyncJob(2, "--checkpoint-every 100 --checkpoint-dir " + ck), 1,
                                  500, log, &after);
  const std::string out = readText(log);
  // braidrun exits with the first failure it reaps: the kill, or a survivor's error.
  EXPECT_TRUE(code == 128 + SIGKILL || code == 1) << code << "\n" << out;
  EXPECT_LT(after, 20) << "the survivors must not wait for a timeout\n" << out;
  expectEveryRankFailedSaying(out, {0, 2, 3}, "server rank 1 is gone");
  ASSERT_TRUE(fs::exists(ck + "/server-0") && fs::exists(ck + "/server-1")) << out;

  fs::remove(path("staleness.jsonl"));
  const RunResult r = run(asyncJob(2, "--checkpoint-every 100 --resume --checkpoint-dir " + ck));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const size_t at = r.output.find("ps resumed from version ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const int64_t resumed = std::atoll(r.output.c_str() + at + 24);
  EXPECT_TRUE(resumed >= 100 && resumed % 100 == 0) << r.output;
  int epoch = 0, batch = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + r.output.find("each worker at epoch"),
                        "each worker at epoch %d, batch %d", &epoch, &batch),
            2)
      << r.output;
  // Each of the 2 workers takes 15,000 samples an epoch in batches of 48: 313 batches, and
  // pushes each to both servers. The resumed run does exactly what was left.
  const int64_t position = (epoch - 1) * 313 + batch;
  EXPECT_GT(position, 0);
  EXPECT_EQ(static_cast<int64_t>(lineCount(path("staleness.jsonl"))), 2 * 2 * (2 * 313 - position))
      << r.output;
}

TEST_F(PsFaults, SyncStopThenResumeIsBitIdentical) {
  // 384 samples, global batch 64: 6 steps per epoch; stop at 6 (an epoch's end) and at 9.
  const std::string common =
      "--strategy ps --ps 2 --optimizer adam --batch 64 --limit-train 384 --limit-test 100 "
      "--epochs 5 ";
  ASSERT_EQ(run(train(4, common + "--max-steps 10 --dump-params " + path("full.bin"))).exitCode, 0);
  for (int stopAt : {6, 9}) {
    const std::string ck = path("ck" + std::to_string(stopAt));
    RunResult r = run(train(4, common + "--max-steps " + std::to_string(stopAt) +
                                   " --checkpoint-every 3 --checkpoint-dir " + ck));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    ASSERT_TRUE(fs::exists(ck + "/server-1/ckpt-" + std::to_string(stopAt) + ".bin")) << r.output;
    const std::string resumed = path("resumed" + std::to_string(stopAt) + ".bin");
    r = run(train(4, common + "--max-steps 10 --resume --checkpoint-dir " + ck + " --dump-params " +
                         resumed));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("ps resumed from version " + std::to_string(stopAt)), std::string::npos)
        << r.output;
    EXPECT_TRUE(readText(resumed) == readText(path("full.bin"))) << "stopped at " << stopAt;
  }
  // Another server count splits the parameters elsewhere: server 0's checkpoint is refused.
  const RunResult r = run(train(3,
                                "--strategy ps --ps 1 --optimizer adam --batch 64 "
                                "--limit-train 384 --epochs 5 --resume --checkpoint-dir " +
                                    path("ck6")));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("layout"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace braid::trainer::testruns
