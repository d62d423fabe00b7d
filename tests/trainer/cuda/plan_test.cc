// The CUDA trainer's CPU side, run everywhere: the layer plan a device model is built from, the
// --device flag's checks, and what braid-train --device cuda does in this build (trains where a
// GPU is, else fails naming why).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/trainer/support/train_runs.h"
#include "trainer/cuda/cuda_training.h"
#include "trainer/cuda/layer_plan.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/pooling.h"
#include "trainer/train/options.h"

namespace braid::trainer::cuda {
namespace {

// Parameterised leaves of a plan, in plan order (residual blocks opened).
void leaves(const std::vector<LayerPlan>& plan, std::vector<const LayerPlan*>& out) {
  for (const LayerPlan& p : plan) {
    if (p.kind == LayerKind::kResidual) {
      leaves(p.children, out);
    } else if (p.paramBegin != Layer::kNoParams) {
      out.push_back(&p);
    }
  }
}

// Each leaf's parameters are its ParamStore views, in order: weight (+ bias) or gamma + beta.
void expectLeavesMatchViews(const Model& m, const std::vector<LayerPlan>& plan) {
  std::vector<const LayerPlan*> ls;
  leaves(plan, ls);
  const auto& views = m.store.paramViews();
  size_t v = 0;
  for (const LayerPlan* l : ls) {
    ASSERT_LT(v, views.size());
    EXPECT_EQ(l->paramBegin, views[v].offset) << views[v].name;
    const bool two = l->kind != LayerKind::kConv2d || l->bias;
    size_t count = views[v].size + (two ? views[v + 1].size : 0);
    EXPECT_EQ(l->paramCount(), count) << views[v].name;
    v += two ? 2 : 1;
  }
  EXPECT_EQ(v, views.size());
}

TEST(CudaPlan, MlpMirrorsItsLayersAndOffsets) {
  auto m = makeMlp(1);
  const auto plan = planModel(*m);
  const std::vector<LayerKind> kinds = {LayerKind::kFlatten, LayerKind::kLinear,
                                        LayerKind::kRelu,    LayerKind::kLinear,
                                        LayerKind::kRelu,    LayerKind::kLinear};
  ASSERT_EQ(plan.size(), kinds.size()) << describePlan(plan);
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(plan[i].kind, kinds[i]) << i;
  EXPECT_EQ(plan[1].in, 784);
  EXPECT_EQ(plan[1].out, 256);
  EXPECT_EQ(plan[5].in, 128);
  EXPECT_EQ(plan[5].out, 10);
  expectLeavesMatchViews(*m, plan);
}

TEST(CudaPlan, ResNetMirrorsBlocksConvolutionsAndBatchNormBuffers) {
  auto m = makeResNet(1);
  const auto plan = planModel(*m);
  ASSERT_EQ(plan.size(), 8u) << describePlan(plan);
  EXPECT_EQ(plan[0].kind, LayerKind::kConv2d);
  EXPECT_EQ(plan[0].kernel, 3);
  EXPECT_FALSE(plan[0].bias);
  EXPECT_EQ(plan[1].kind, LayerKind::kBatchNorm2d);
  EXPECT_EQ(plan[3].kind, LayerKind::kResidual);
  EXPECT_EQ(plan[3].children.size(), 4u);  // 16 -> 16, stride 1: identity shortcut
  EXPECT_EQ(plan[4].children.size(), 6u);  // 16 -> 32, stride 2: projection
  EXPECT_EQ(plan[4].children[0].stride, 2);
  EXPECT_EQ(plan[4].children[4].kernel, 1);
  EXPECT_EQ(plan[6].kind, LayerKind::kGlobalAvgPool);
  EXPECT_EQ(plan[7].kind, LayerKind::kLinear);
  expectLeavesMatchViews(*m, plan);

  // Each batch norm's running_mean / running_var views, in order.
  std::vector<const LayerPlan*> ls;
  leaves(plan, ls);
  std::vector<size_t> bnBuffers;
  for (const LayerPlan* l : ls) {
    if (l->kind == LayerKind::kBatchNorm2d) bnBuffers.push_back(l->bufferBegin);
  }
  const auto& bviews = m->store.bufferViews();
  ASSERT_EQ(bviews.size(), 2 * bnBuffers.size());
  for (size_t i = 0; i < bnBuffers.size(); ++i) {
    EXPECT_EQ(bviews[2 * i].offset, bnBuffers[i]) << bviews[2 * i].name;
    EXPECT_EQ(bviews[2 * i + 1].offset, bnBuffers[i] + bviews[2 * i].size)
        << bviews[2 * i + 1].name;
  }
}

TEST(CudaPlan, RefusesALayerWithoutADeviceVersion) {
  Model m;
  m.name = "pooled";
  m.net.emplace<MaxPool2d>(2, 2);
  m.net.emplace<Flatten>();
  m.net.emplace<Linear>(m.store, "fc", 4, 2);
  m.store.finalize(3);
  try {
    planModel(m);
    FAIL() << "planned a MaxPool2d";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("MaxPool2d"), std::string::npos) << e.what();
  }
}

ParseResult parse(std::vector<const char*> args) {
  args.insert(args.begin(), "braid-train");
  return parseTrainOptions(static_cast<int>(args.size()), args.data());
}

std::string parseError(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaFlags, DeviceDefaultsToCpuAndTakesCuda) {
  EXPECT_EQ(parse({}).options.device, "cpu");
  EXPECT_EQ(parse({"--device", "cuda"}).options.device, "cuda");
  EXPECT_TRUE(parse({"--device", "gpu"}).exitCode.has_value());  // CLI11 refuses the value
}

TEST(CudaFlags, TakesFp16WithItsLossScaleFlags) {
  const TrainOptions o =
      parse({"--device", "cuda", "--precision", "fp16", "--init-scale", "1024"}).options;
  EXPECT_EQ(o.precision, "fp16");
  EXPECT_EQ(o.lossScalerOptions().initScale, 1024.0f);
  EXPECT_EQ(parse({"--device", "cuda", "--precision", "fp16", "--loss-scale", "128"})
                .options.lossScalerOptions()
                .fixedScale,
            128.0f);
  EXPECT_NE(parseError({"--device", "cuda", "--precision", "fp16", "--loss-scale", "0"}), "");
}

TEST(CudaFlags, RefusesWhatTheGpuPathDoesNotHave) {
  EXPECT_NE(parseError({"--device", "cuda", "--precision", "fp16", "--tf32"}).find("drop --tf32"),
            std::string::npos);
  EXPECT_NE(parseError({"--device", "cuda", "--precision", "fp16", "--checkpoint-dir", "/tmp/x"})
                .find("no checkpoints"),
            std::string::npos);
  EXPECT_NE(parseError({"--device", "cuda", "--strategy", "ps", "--ps", "1"}).find("ddp only"),
            std::string::npos);
  EXPECT_NE(parseError({"--device", "cuda", "--checkpoint-dir", "/tmp/x"}).find("no checkpoints"),
            std::string::npos);
  EXPECT_EQ(parseError({"--device", "cpu", "--precision", "fp16"}), "");
}

class CudaTrainCli : public testruns::TrainRunTest {};

// Where the CUDA trainer is not built, or no GPU is here, --device cuda fails naming why; with a
// GPU a few steps train and print the epoch line, which then shows `shows`.
void expectTrainsOrSaysWhyNot(const std::string& flags, const std::string& shows) {
  const auto r = testruns::run(testruns::trainCommand(
      1,
      "--device cuda --model mlp --epochs 1 --max-steps 3 --batch 32 --limit-train 256 "
      "--limit-test 200 " +
          flags));
  if (!cudaTrainingBuilt()) {
    EXPECT_NE(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("built without the CUDA trainer"), std::string::npos) << r.output;
  } else if (r.output.find("no CUDA device") != std::string::npos) {
    EXPECT_NE(r.exitCode, 0) << r.output;
  } else {
    EXPECT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find(shows), std::string::npos) << r.output;
  }
}

TEST_F(CudaTrainCli, DeviceCudaTrainsOrSaysWhyNot) { expectTrainsOrSaysWhyNot("", "test acc"); }

// fp16: the epoch line shows the skipped steps and the loss scale.
TEST_F(CudaTrainCli, DeviceCudaFp16TrainsOrSaysWhyNot) {
  expectTrainsOrSaysWhyNot("--precision fp16", "loss scale");
}

}  // namespace
}  // namespace braid::trainer::cuda
