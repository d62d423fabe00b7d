// What the end-to-end tests of braid-train (ddp, ps, pipeline) share: its command lines, running
// one with its output captured or a launcher in the background whose ranks can be found (and
// killed) by their RANK, the data check and scratch directory, and reading and comparing
// --dump-params / --dump-grads files.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/skip.h"
#include "trainer/data/dataset.h"

extern char** environ;

namespace braid::trainer::testruns {

/// braid-train --quiet with `args` on `ranks` ranks: the binary itself for 1, under
/// `braidrun -n ranks` (with the braidrun flags `launcher`) otherwise. The test target defines
/// BRAID_TRAIN_BIN and BRAIDRUN_BIN.
inline std::string trainCommand(int ranks, const std::string& args,
                                const std::string& launcher = "") {
  const std::string bin = std::string(BRAID_TRAIN_BIN) + " --quiet " + args;
  if (ranks == 1) return bin;
  return std::string(BRAIDRUN_BIN) + " -n " + std::to_string(ranks) + " " + launcher + " " + bin;
}

struct RunResult {
  int exitCode = -1;   ///< -1: killed by a signal (coreutils timeout included)
  std::string output;  ///< stdout and stderr together
};

/// Runs a shell command line (bounded by coreutils timeout) and captures its output.
inline RunResult run(const std::string& command, int timeoutSeconds = 90) {
  RunResult r;
  const std::string line = "timeout " + std::to_string(timeoutSeconds) + " " + command + " 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, got);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string readText(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Lines of `file` (0 when it does not exist).
inline size_t lineCount(const std::string& file) {
  const std::string text = readText(file);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

/// Starts `command` (through the shell, exec'd, so the pid is the command's) with its output
/// going to `logFile`; -1 on failure.
inline pid_t spawnLogged(const std::string& command, const std::string& logFile) {
  const std::string line = "exec " + command + " >" + logFile + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
    return -1;
  }
  return pid;
}

/// The child of `launcher` whose environment has RANK=<rank>; -1 when there is none (yet).
inline pid_t rankProcess(pid_t launcher, int rank) {
  std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) +
                         "/children");
  const std::string want = "RANK=" + std::to_string(rank);
  for (pid_t child; children >> child;) {
    const std::string env = readText("/proc/" + std::to_string(child) + "/environ");
    for (size_t i = 0; i < env.size();) {
      const std::string entry(env.c_str() + i);
      if (entry == want) return child;
      i += entry.size() + 1;
    }
  }
  return -1;
}

/// Waits for `pid` up to `seconds`, then kills it; its exit code, 128 + signal, or -1 when it
/// had to be killed at the deadline.
inline int waitExit(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return -2;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Polls `ready` every 20 ms until it returns true or `seconds` pass; returns the last answer.
template <typename F>
bool waitUntil(F&& ready, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

/// Debian's Fashion-MNIST is installed.
inline bool haveData() {
  const std::filesystem::path dir = kDefaultFashionMnistDir;
  return std::filesystem::exists(dir / "train-images-idx3-ubyte.gz") ||
         std::filesystem::exists(dir / "train-images-idx3-ubyte");
}

/// A raw float32 file (--dump-params, --dump-grads).
inline std::vector<float> readFloats(const std::string& file) {
  const std::string bytes = readText(file);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

/// Max |a - b| over all elements (NaN counts as infinite), failing on a size mismatch.
inline float maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

/// A test that runs braid-train: skipped without Fashion-MNIST; path() names files in a fresh
/// temporary directory removed afterwards.
class TrainRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveData()) {
      BRAID_SKIP_MISSING("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    }
    dir_ = std::filesystem::temp_directory_path() /
           ("braid_train_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace braid::trainer::testruns
