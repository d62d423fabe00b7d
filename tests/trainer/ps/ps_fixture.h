// What the end-to-end tests of braid-train --strategy ps share: a scratch directory, the data
// check, and the command lines.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "tests/trainer/cli_process.h"
#include "trainer/data/dataset.h"

namespace braid::testing {

class PsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    const fs::path data = trainer::kDefaultFashionMnistDir;
    if (!fs::exists(data / "train-images-idx3-ubyte.gz") &&
        !fs::exists(data / "train-images-idx3-ubyte")) {
      BRAID_SKIP_MISSING("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    }
    dir_ = fs::temp_directory_path() /
           ("braid_ps_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// braid-train on `ranks` ranks (1: without a launcher); `launcher` adds braidrun flags.
  static std::string train(int ranks, const std::string& args, const std::string& launcher = "") {
    const std::string bin = std::string(BRAID_TRAIN_BIN) + " --quiet --threads 1 " + args;
    if (ranks == 1) return bin;
    return std::string(BRAIDRUN_BIN) + " -n " + std::to_string(ranks) + " " + launcher + " " + bin;
  }

  static std::vector<float> readFloats(const std::string& file) {
    const std::string bytes = readText(file);
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }

  /// Lines of `file` (0 when it does not exist).
  static size_t lineCount(const std::string& file) {
    const std::string text = readText(file);
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }

  std::filesystem::path dir_;
};

}  // namespace braid::testing
