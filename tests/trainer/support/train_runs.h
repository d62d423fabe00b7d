// What the end-to-end tests of braid-train share: running a command line, the data check, and
// reading and comparing --dump-params / --dump-grads files.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "trainer/data/dataset.h"

namespace braid::trainer::testruns {

struct RunResult {
  int exitCode = -1;
  std::string output;  // stdout and stderr together
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

/// Debian's Fashion-MNIST is installed.
inline bool haveData() {
  const std::filesystem::path dir = kDefaultFashionMnistDir;
  return std::filesystem::exists(dir / "train-images-idx3-ubyte.gz") ||
         std::filesystem::exists(dir / "train-images-idx3-ubyte");
}

/// A raw float32 file (--dump-params, --dump-grads).
inline std::vector<float> readFloats(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
