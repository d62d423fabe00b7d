// Checkpoints of braid-train: the file format's integrity checks, atomic writing and rotation,
// and end-to-end stop + --resume runs (1 and 2 ranks) that must end bit-identical to an
// uninterrupted run.
#include "trainer/train/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "tests/support/skip.h"
#include "tests/trainer/support/train_runs.h"
#include "trainer/data/dataset.h"

namespace braid::trainer {
namespace {

namespace fs = std::filesystem;

std::vector<char> readBytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeBytes(const std::string& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Expects `fn` to throw braid::Error whose message contains every one of `parts`.
template <typename Fn>
void expectErrorWith(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(what.find(p), std::string::npos) << "expected '" << p << "' in: " << what;
    }
  }
}

CheckpointState sampleState(int64_t step) {
  CheckpointState s;
  s.fingerprint = {0x1234abcdull, "mlp", 2, 64, "adam", 7, 384};
  s.step = step;
  s.sampler = {1, 3};
  for (int i = 0; i < 1000; ++i) s.params.push_back(0.001f * static_cast<float>(i) - 0.3f);
  s.buffers = {1.0f, 2.0f, -3.5f};
  s.optimizer = {'o', 'p', 't', '\0', 'x'};
  return s;
}

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_ckpt_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST(CheckpointFormat, RoundTripsEveryField) {
  const CheckpointState s = sampleState(42);
  const CheckpointState d = decodeCheckpoint(encodeCheckpoint(s), "mem");
  EXPECT_EQ(d.fingerprint.layoutHash, s.fingerprint.layoutHash);
  EXPECT_EQ(d.fingerprint.model, "mlp");
  EXPECT_EQ(d.fingerprint.ranks, 2);
  EXPECT_EQ(d.fingerprint.globalBatch, 64);
  EXPECT_EQ(d.fingerprint.optimizer, "adam");
  EXPECT_EQ(d.fingerprint.seed, 7u);
  EXPECT_EQ(d.fingerprint.trainSamples, 384);
  EXPECT_EQ(d.step, 42);
  EXPECT_EQ(d.sampler, s.sampler);
  ASSERT_EQ(d.params.size(), s.params.size());
  EXPECT_EQ(std::memcmp(d.params.data(), s.params.data(), s.params.size() * sizeof(float)), 0);
  EXPECT_EQ(d.buffers, s.buffers);
  EXPECT_EQ(d.optimizer, s.optimizer);
}

TEST(CheckpointFormat, RefusesTruncatedAndFlippedBytes) {
  const std::vector<char> good = encodeCheckpoint(sampleState(3));
  // Every truncation length is refused (length or header check).
  for (size_t len : {size_t{0}, size_t{7}, size_t{20}, good.size() / 2, good.size() - 1}) {
    std::vector<char> cut(good.begin(), good.begin() + static_cast<long>(len));
    expectErrorWith([&] { decodeCheckpoint(cut, "f.bin"); }, {"'f.bin'"});
  }
  // A flipped bit anywhere is refused: in the header, the fingerprint, the data, the checksum.
  for (size_t at : {size_t{9}, size_t{30}, good.size() / 2, good.size() - 1}) {
    std::vector<char> bad = good;
    bad[at] ^= 0x10;
    EXPECT_THROW(decodeCheckpoint(bad, "f.bin"), Error) << "byte " << at;
  }
  std::vector<char> bad = good;
  bad[good.size() / 2] ^= 0x01;
  expectErrorWith([&] { decodeCheckpoint(bad, "f.bin"); }, {"'f.bin'", "checksum"});
  std::vector<char> cut(good.begin(), good.end() - 100);
  expectErrorWith([&] { decodeCheckpoint(cut, "f.bin"); }, {"'f.bin'", "truncated"});
}

TEST(CheckpointFormat, FingerprintMismatchNamesWhatDiffers) {
  const CheckpointFingerprint saved = sampleState(1).fingerprint;
  EXPECT_NO_THROW(checkFingerprint(saved, saved, "c.bin"));
  CheckpointFingerprint other = saved;
  other.model = "resnet";
  expectErrorWith([&] { checkFingerprint(saved, other, "c.bin"); },
                  {"'c.bin'", "model 'mlp'", "'resnet'"});
  other = saved;
  other.ranks = 1;
  other.globalBatch = 128;
  expectErrorWith([&] { checkFingerprint(saved, other, "c.bin"); },
                  {"2 rank(s) (this run: 1)", "global batch 64"});
  other = saved;
  other.layoutHash ^= 1;
  expectErrorWith([&] { checkFingerprint(saved, other, "c.bin"); }, {"layout"});
  other = saved;
  other.optimizer = "sgd";
  expectErrorWith([&] { checkFingerprint(saved, other, "c.bin"); }, {"optimizer adam"});
}

TEST_F(CheckpointFiles, WritesAtomicallyAndKeepsNewestTwo) {
  const std::string sub = path("ck");  // created by writeCheckpoint
  for (int64_t step : {5, 10, 15}) {
    EXPECT_EQ(writeCheckpoint(sub, sampleState(step)),
              (fs::path(sub) / fmt::format("ckpt-{}.bin", step)).string());
  }
  const std::vector<std::string> files = listCheckpoints(sub);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).filename(), "ckpt-15.bin");
  EXPECT_EQ(fs::path(files[1]).filename(), "ckpt-10.bin");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(sub)) {
    EXPECT_EQ(e.path().filename().string().rfind("tmp-", 0), std::string::npos) << e.path();
    ++entries;
  }
  EXPECT_EQ(entries, 2);
  EXPECT_EQ(decodeCheckpoint(readBytes(files[0]), files[0]).step, 15);
}

TEST_F(CheckpointFiles, LoadFallsBackToOlderCompleteOneOrFailsClearly) {
  const std::string dir = dir_.string();
  expectErrorWith([&] { loadNewestCheckpoint(dir, nullptr); }, {"no checkpoint", dir});
  writeCheckpoint(dir, sampleState(2));
  writeCheckpoint(dir, sampleState(4));
  std::vector<char> b = readBytes(path("ckpt-4.bin"));
  b[b.size() / 2] ^= 0x40;
  writeBytes(path("ckpt-4.bin"), b);
  const LoadedCheckpoint l = loadNewestCheckpoint(dir, nullptr);
  EXPECT_EQ(l.path, path("ckpt-2.bin"));
  EXPECT_EQ(decodeCheckpoint(l.bytes, l.path).step, 2);
  b = readBytes(path("ckpt-2.bin"));
  b.resize(b.size() - 9);
  writeBytes(path("ckpt-2.bin"), b);
  expectErrorWith([&] { loadNewestCheckpoint(dir, nullptr); },
                  {"no complete checkpoint", "ckpt-4.bin", "checksum", "ckpt-2.bin", "truncated"});
}

// --- End-to-end runs of braid-train ------------------------------------------------------------

using testruns::RunResult;

RunResult run(const std::string& command) { return testruns::run(command, 60); }

class ResumeCli : public CheckpointFiles {
 protected:
  void SetUp() override {
    if (!testruns::haveData()) {
      BRAID_SKIP_MISSING("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    }
    CheckpointFiles::SetUp();
  }
  /// 384 samples, global batch 64: 6 steps per epoch, so runs to step 10 cross an epoch.
  /// The default model (the MLP) with Adam, so the optimizer's moments and step count must come
  /// back too.
  static std::string common() {
    return "--optimizer adam --batch 64 --limit-train 384 --limit-test 100 --epochs 5 "
           "--threads 1 --bucket-mb 0.25 ";
  }
  static std::string one(const std::string& args) {
    return testruns::trainCommand(1, common() + args);
  }
  static std::string two(const std::string& args) {
    return testruns::trainCommand(2, common() + args);
  }
  void expectSameBytes(const std::string& a, const std::string& b) {
    const std::vector<char> x = readBytes(a), y = readBytes(b);
    EXPECT_EQ(x.size(), 235146 * sizeof(float));
    EXPECT_TRUE(x == y) << a << " and " << b << " differ";
  }
};

TEST_F(ResumeCli, OneRankStopMidEpochThenResumeIsBitIdentical) {
  RunResult r = run(one("--max-steps 10 --dump-params " + path("full.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string ck = path("ck");
  r = run(one("--max-steps 5 --checkpoint-every 5 --checkpoint-dir " + ck));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  ASSERT_TRUE(fs::exists(ck + "/ckpt-5.bin")) << r.output;
  r = run(one("--max-steps 10 --resume --checkpoint-dir " + ck + " --dump-params " +
              path("resumed.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from step 5"), std::string::npos) << r.output;
  expectSameBytes(path("full.bin"), path("resumed.bin"));
  // The run itself must not be a no-op: step 5's parameters differ from step 10's.
  r = run(one("--max-steps 5 --dump-params " + path("half.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_FALSE(readBytes(path("half.bin")) == readBytes(path("full.bin")));
}

TEST_F(ResumeCli, TwoRanksStopAtEpochEndThenResumeIsBitIdentical) {
  RunResult r = run(two("--max-steps 10 --dump-params " + path("full.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string ck = path("ck");
  r = run(two("--max-steps 6 --checkpoint-every 3 --checkpoint-dir " + ck));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  ASSERT_TRUE(fs::exists(ck + "/ckpt-6.bin") && fs::exists(ck + "/ckpt-3.bin")) << r.output;
  r = run(two("--max-steps 10 --resume --checkpoint-dir " + ck + " --dump-params " +
              path("resumed.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from step 6 (epoch 2, batch 0)"), std::string::npos) << r.output;
  expectSameBytes(path("full.bin"), path("resumed.bin"));
  // Every rank fails with rank 0's message when there is no checkpoint.
  r = run(two("--resume --checkpoint-dir " + path("empty")));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("no checkpoint (ckpt-<step>.bin) in --checkpoint-dir"), std::string::npos)
      << r.output;
  // A 2-rank checkpoint is refused by a 1-rank run.
  r = run(one("--max-steps 10 --resume --checkpoint-dir " + ck));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s) (this run: 1)"), std::string::npos) << r.output;
}

/// Direct children of `pid` (from /proc; braidrun forks the ranks itself).
std::vector<pid_t> childrenOf(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<pid_t> out;
  for (pid_t child; in >> child;) out.push_back(child);
  return out;
}

/// The value of `name` in the environment of process `pid`, or "".
std::string environOf(pid_t pid, const std::string& name) {
  const std::vector<char> env = readBytes(fmt::format("/proc/{}/environ", pid));
  const std::string prefix = name + "=";
  for (size_t i = 0; i < env.size();) {
    const std::string entry(env.data() + i);
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
    i += entry.size() + 1;
  }
  return "";
}

TEST_F(ResumeCli, TwoRanksOneKilledMidEpochThenResumeIsBitIdentical) {
  // 6 steps per epoch; the job runs 600 steps and checkpoints every 4. Rank 1 is killed with
  // SIGKILL as soon as ckpt-8 (epoch 2, batch 2) exists, long before the end.
  const std::string steps = " --max-steps 600";
  RunResult r = run(two(steps + " --dump-params " + path("full.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;

  const std::string ck = path("ck"), log = path("killed.log");
  std::istringstream words(two(steps + " --checkpoint-every 4 --checkpoint-dir " + ck));
  std::vector<std::string> argvStrings{std::istream_iterator<std::string>(words),
                                       std::istream_iterator<std::string>()};
  std::vector<char*> argv;
  for (auto& a : argvStrings) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t launcher = -1;
  ASSERT_EQ(posix_spawn(&launcher, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);

  pid_t victim = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (victim < 0 && std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(ck + "/ckpt-8.bin")) {
      for (pid_t child : childrenOf(launcher)) {
        if (environOf(child, "RANK") == "1") victim = child;
      }
    }
    if (victim < 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GT(victim, 0) << "rank 1 of the checkpointing run never reached step 8";
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  const std::string killedOutput = [&] {
    const std::vector<char> b = readBytes(log);
    return std::string(b.begin(), b.end());
  }();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
      << "the job must fail when a rank is killed\n"
      << killedOutput;
  EXPECT_FALSE(fs::exists(ck + "/ckpt-600.bin")) << "the kill came too late\n" << killedOutput;

  r = run(
      two(steps + " --resume --checkpoint-dir " + ck + " --dump-params " + path("resumed.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const size_t at = r.output.find("resumed from step ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const int resumedStep = std::atoi(r.output.c_str() + at + 18);
  EXPECT_TRUE(resumedStep >= 8 && resumedStep < 600 && resumedStep % 4 == 0) << r.output;
  expectSameBytes(path("full.bin"), path("resumed.bin"));
}

TEST_F(ResumeCli, CorruptNewestFallsBackThenRefusals) {
  const std::string ck = path("ck");
  RunResult r = run(one("--max-steps 8 --dump-params " + path("full.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = run(one("--max-steps 4 --checkpoint-every 2 --checkpoint-dir " + ck));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string c2 = ck + "/ckpt-2.bin", c4 = ck + "/ckpt-4.bin";
  ASSERT_TRUE(fs::exists(c2) && fs::exists(c4)) << r.output;
  std::vector<char> b = readBytes(c4);
  b[b.size() / 3] ^= 0x04;  // one bit in the parameters
  writeBytes(c4, b);
  r = run(one("--max-steps 8 --resume --checkpoint-dir " + ck + " --dump-params " +
              path("resumed.bin")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("skipping incomplete checkpoint: checkpoint '" + c4), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resumed from step 2"), std::string::npos) << r.output;
  expectSameBytes(path("full.bin"), path("resumed.bin"));

  // Another model refuses the MLP's checkpoint, naming the file and the model.
  r = run(one("--max-steps 8 --resume --checkpoint-dir " + ck + " --model resnet"));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("does not fit this run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model 'mlp' (this run: 'resnet')"), std::string::npos) << r.output;

  // With every checkpoint damaged --resume fails and names each file.
  b = readBytes(c2);
  b.resize(b.size() / 2);
  writeBytes(c2, b);
  r = run(one("--max-steps 8 --resume --checkpoint-dir " + ck));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("no complete checkpoint"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(c2), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(c4), std::string::npos) << r.output;

  // An empty directory, and --resume without a directory.
  r = run(one("--resume --checkpoint-dir " + path("empty")));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("no checkpoint"), std::string::npos) << r.output;
  r = run(one("--resume"));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("--resume needs --checkpoint-dir"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace braid::trainer
