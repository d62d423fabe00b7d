// End-to-end runs of braid-train (1 rank directly, 2 ranks under braidrun) on a small subset of
// Debian's Fashion-MNIST.
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
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "tests/trainer/support/train_runs.h"
#include "trainer/data/dataset.h"
#include "trainer/nn/models.h"

namespace {

using namespace braid::trainer::testruns;  // NOLINT(google-build-using-namespace)

class TrainCli : public TrainRunTest {
 protected:
  static std::string train(const std::string& args) { return trainCommand(1, args); }
  static std::string train2(const std::string& args) { return trainCommand(2, args); }
};

// The MLP's parameter count (784*256+256 + 256*128+128 + 128*10+10).
constexpr size_t kMlpParams = 235146;

// A 2-rank run with global batch 64 sees the same samples per step as a 1-rank run with batch 64
// (the sampler guarantees it), and averaging two 32-sample mean gradients equals the 64-sample
// mean up to float32 rounding in a different summation order. After 40 SGD steps the parameters
// (|w| ~ 0.05) agree to 2e-5 absolute; measured differences are ~1e-7. Gradient accumulation
// (2 micro-batches of 32) is the same computation on one rank, and tiny buckets (many
// overlapped all-reduces) must not change the result.
TEST_F(TrainCli, TwoRanksMatchOneRankAndAccumulation) {
  const std::string base =
      "--model mlp --optimizer sgd --batch 64 --seed 7 --epochs 1 --limit-train 4096 "
      "--limit-test 200 ";
  const std::string common = base + "--lr 0.05 --max-steps 40 ";
  RunResult one = run(train(common + "--dump-params " + path("one.bin")));
  ASSERT_EQ(one.exitCode, 0) << one.output;
  RunResult two = run(train2(common + "--bucket-mb 0.05 --dump-params " + path("two.bin")));
  ASSERT_EQ(two.exitCode, 0) << two.output;
  RunResult acc = run(train(common + "--accum 2 --dump-params " + path("acc.bin")));
  ASSERT_EQ(acc.exitCode, 0) << acc.output;

  const auto p1 = readFloats(path("one.bin"));
  const auto p2 = readFloats(path("two.bin"));
  const auto pa = readFloats(path("acc.bin"));
  ASSERT_EQ(p1.size(), kMlpParams);
  constexpr float kTolerance = 2e-5f;
  const float d2 = maxAbsDiff(p1, p2), da = maxAbsDiff(p1, pa);
  std::printf("max |1 rank - 2 ranks| = %g, max |1 rank - accum 2| = %g\n", d2, da);
  EXPECT_LE(d2, kTolerance);
  EXPECT_LE(da, kTolerance);
  // The run did train: parameters moved away from the shared initialisation.
  RunResult init = run(train(base + "--max-steps 1 --lr 1e-9 --dump-params " + path("i.bin")));
  ASSERT_EQ(init.exitCode, 0) << init.output;
  EXPECT_GT(maxAbsDiff(p1, readFloats(path("i.bin"))), 1e-3f);
}

// --check-sync hashes the parameters after every step on both ranks: MLP with Adam and many
// buckets, and the ResNet (batch norm, per-rank running statistics) for a few steps.
TEST_F(TrainCli, CheckSyncPassesOnTwoRanks) {
  RunResult mlp =
      run(train2("--model mlp --optimizer adam --batch 64 --bucket-mb 0.1 --check-sync --epochs 2 "
                 "--limit-train 1280 --limit-test 200 --log " +
                 path("mlp.csv")));
  ASSERT_EQ(mlp.exitCode, 0) << mlp.output;
  std::ifstream csv(path("mlp.csv"));
  std::string header, row1, row2;
  std::getline(csv, header);
  std::getline(csv, row1);
  std::getline(csv, row2);
  EXPECT_EQ(header.rfind("epoch,steps,train_loss,train_acc,test_acc,samples_per_s", 0), 0u);
  EXPECT_EQ(row1.rfind("1,20,", 0), 0u) << row1;
  EXPECT_EQ(row2.rfind("2,20,", 0), 0u) << row2;

  RunResult resnet = run(train2(
      "--model resnet --optimizer sgd --batch 16 --bucket-mb 0.05 --check-sync --max-steps 4 "
      "--limit-train 640 --limit-test 64"));
  ASSERT_EQ(resnet.exitCode, 0) << resnet.output;
  EXPECT_NE(resnet.output.find("epoch 1/10"), std::string::npos) << resnet.output;
}

// A few hundred Adam steps on 6,400 samples: the training loss falls well below its first
// epoch's and the test accuracy is far above chance (10%).
TEST_F(TrainCli, MlpLossDecreases) {
  RunResult r =
      run(train("--model mlp --optimizer adam --batch 64 --epochs 3 --seed 1 "
                "--limit-train 6400 --limit-test 1000 --log " +
                path("log.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::ifstream in(path("log.json"));
  const auto doc = nlohmann::json::parse(in);
  const auto& epochs = doc.at("epochs");
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs[0].at("steps").get<int>() * 3, 300);
  const double first = epochs[0].at("train_loss").get<double>();
  const double last = epochs[2].at("train_loss").get<double>();
  EXPECT_LT(last, 0.75 * first) << r.output;
  EXPECT_LT(last, 0.6) << r.output;
  EXPECT_GT(epochs[2].at("test_acc").get<double>(), 0.75) << r.output;
  EXPECT_EQ(doc.at("run").at("ranks").get<int>(), 1);
}

// --precision fp16 on 2 ranks: gradients all-reduced as float16 with dynamic loss scaling
// (65536 at the start), ~100 Adam steps with --check-sync after
// every step. The loss must fall like the fp32 run's and the log must show the fp16 columns.
TEST_F(TrainCli, Fp16TrainsAndKeepsRanksInSync) {
  RunResult r = run(train2(
      "--model mlp --optimizer adam --batch 64 --precision fp16 --bucket-mb 0.1 --check-sync "
      "--epochs 2 --limit-train 3200 --limit-test 500 --log " +
      path("fp16.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::ifstream in(path("fp16.json"));
  const auto doc = nlohmann::json::parse(in);
  const auto& epochs = doc.at("epochs");
  ASSERT_EQ(epochs.size(), 2u);
  const double first = epochs[0].at("train_loss").get<double>();
  const double last = epochs[1].at("train_loss").get<double>();
  EXPECT_LT(last, 0.8 * first) << r.output;
  EXPECT_LT(last, 0.75) << r.output;
  EXPECT_GT(epochs[1].at("test_acc").get<double>(), 0.7) << r.output;
  EXPECT_EQ(epochs[0].at("steps").get<int>(), 50);
  // Like GradScaler, the first steps may overflow at 65536 (measured: 2 skipped, scale 16384);
  // each skip halves the scale and 100 steps are too few to double it.
  const int skipped =
      epochs[0].at("skipped_steps").get<int>() + epochs[1].at("skipped_steps").get<int>();
  EXPECT_LE(skipped, 5) << r.output;
  EXPECT_EQ(epochs[1].at("loss_scale").get<double>(), 65536.0 / (1 << skipped)) << r.output;
  EXPECT_EQ(doc.at("run").at("precision").get<std::string>(), "fp16");
}

// The skip path end to end: a loss scale of 1e30 makes every gradient overflow float16, so every
// rank skips every step (parameters stay rank 0's initial ones, --check-sync confirms equality)
// and the dynamic scale halves once per step.
TEST_F(TrainCli, Fp16OverflowSkipsOnEveryRankAndHalvesTheScale) {
  const std::string base =
      "--model mlp --optimizer adam --batch 64 --seed 3 --epochs 1 --limit-train 640 "
      "--limit-test 100 --precision fp16 --check-sync ";
  RunResult dyn = run(train2(base + "--init-scale 1e30 --max-steps 4 --log " + path("d.csv") +
                             " --dump-params " + path("dyn.bin")));
  ASSERT_EQ(dyn.exitCode, 0) << dyn.output;
  EXPECT_NE(dyn.output.find("skipped 4  loss scale 6.25e+28"), std::string::npos) << dyn.output;
  std::ifstream csv(path("d.csv"));
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  EXPECT_NE(header.find(",skipped_steps,loss_scale"), std::string::npos) << header;
  EXPECT_NE(row.find(",4,6.25e+28"), std::string::npos) << row;
  // A fixed scale skips just the same but never changes.
  RunResult fixed =
      run(train2(base + "--loss-scale 1e30 --max-steps 2 --dump-params " + path("fix.bin")));
  ASSERT_EQ(fixed.exitCode, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("skipped 2  loss scale 1e+30"), std::string::npos) << fixed.output;
  // Rank 0's initial parameters, made here the way braid-train makes them.
  auto model = braid::trainer::makeModel("mlp", 3);
  const std::vector<float> p0(model->store.params(),
                              model->store.params() + model->store.numParams());
  ASSERT_EQ(p0.size(), kMlpParams);
  EXPECT_EQ(readFloats(path("dyn.bin")), p0);
  EXPECT_EQ(readFloats(path("fix.bin")), p0);
}

// fp16 checkpoints carry the loss scale, the good-step counter and the skipped steps: with
// --init-scale 2^20 the first 2 steps overflow (measured), a checkpoint at step 5 (3 optimizer
// steps, scale 2^18) resumed to step 10 gives byte-identical parameters to an uninterrupted run.
TEST_F(TrainCli, Fp16ResumeIsBitIdentical) {
  const std::string a =
      "--model mlp --optimizer adam --batch 64 --limit-train 384 --limit-test 100 --epochs 2 "
      "--precision fp16 --init-scale 1048576 ";
  RunResult full = run(train(a + "--max-steps 10 --dump-params " + path("full.bin")));
  ASSERT_EQ(full.exitCode, 0) << full.output;
  EXPECT_NE(full.output.find("skipped 2  loss scale 262144"), std::string::npos) << full.output;
  const std::string ck = "--checkpoint-dir " + path("ck") + " ";
  RunResult first = run(train(a + ck + "--max-steps 5 --checkpoint-every 5"));
  ASSERT_EQ(first.exitCode, 0) << first.output;
  RunResult resumed =
      run(train(a + ck + "--max-steps 10 --resume --dump-params " + path("res.bin")));
  ASSERT_EQ(resumed.exitCode, 0) << resumed.output;
  const auto p1 = readFloats(path("full.bin"));
  ASSERT_EQ(p1.size(), kMlpParams);
  EXPECT_TRUE(p1 == readFloats(path("res.bin")));
}

void expectFailure(const RunResult& r, const std::string& message) {
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << "expected '" << message << "' in\n"
                                                       << r.output;
}

TEST_F(TrainCli, BadFlagsFailClearly) {
  expectFailure(run(train("--model vgg")), "--model 'vgg' is unknown");
  expectFailure(run(train("--precision fp8")), "--precision 'fp8' is unknown");
  expectFailure(run(train("--precision fp16 --loss-scale 0")), "--loss-scale 0 must be positive");
  expectFailure(run(train("--precision fp16 --init-scale -1")), "--init-scale -1 must be positive");
  expectFailure(run(train("--optimizer lamb")), "--optimizer 'lamb' is unknown");
  expectFailure(run(train("--batch 64 --accum 3 --max-steps 1")), "not divisible by --accum 3");
  expectFailure(run(train("--log out.txt")), "must end in .csv or .json");
  expectFailure(run(train("--no-such-flag")), "--no-such-flag");
  // Each strategy's flags need their strategy (ddp is the default).
  expectFailure(run(train("--schedule 1f1b")),
                "need --strategy pipeline (got --schedule with --strategy ddp)");
  expectFailure(run(train("--mode sync")), "need --strategy ps (got --mode with --strategy ddp)");
  expectFailure(run(train("--data " + path("nowhere"))), path("nowhere"));
  expectFailure(run(train2("--batch 127 --max-steps 1")),
                "--batch 127 (the global batch) is not divisible by the 2 ranks");
}

}  // namespace
