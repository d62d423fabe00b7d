#include "trainer/nn/models.h"

#include <fmt/format.h>

#include "common/error.h"
#include "trainer/nn/batch_norm.h"
#include "trainer/nn/conv2d.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/pooling.h"
#include "trainer/nn/relu.h"
#include "trainer/nn/residual.h"

namespace braid::trainer {

std::unique_ptr<Model> makeMlp(uint64_t seed, const MlpOptions& options) {
  auto model = std::make_unique<Model>();
  model->name = "mlp";
  model->inputShape = {options.inputs};
  model->numClasses = options.classes;
  ParamStore& store = model->store;
  Sequential& net = model->net;
  net.emplace<Flatten>();
  int width = options.inputs;
  for (size_t i = 0; i < options.hidden.size(); ++i) {
    net.emplace<Linear>(store, fmt::format("fc{}", i + 1), width, options.hidden[i]);
    net.emplace<Relu>();
    width = options.hidden[i];
  }
  net.emplace<Linear>(store, fmt::format("fc{}", options.hidden.size() + 1), width,
                      options.classes);
  store.finalize(seed);
  return model;
}

std::unique_ptr<Model> makeResNet(uint64_t seed, const ResNetOptions& options) {
  BRAID_ENFORCE(!options.stageChannels.empty() && options.blocksPerStage >= 1,
                ErrorCode::kInvalidUsage, "makeResNet: {} stages, {} blocks per stage",
                options.stageChannels.size(), options.blocksPerStage);
  auto model = std::make_unique<Model>();
  model->name = "resnet";
  model->inputShape = {options.inChannels, 28, 28};
  model->numClasses = options.classes;
  ParamStore& store = model->store;
  Sequential& net = model->net;
  int channels = options.stageChannels[0];
  net.emplace<Conv2d>(store, "stem.conv", options.inChannels, channels, 3, 1, 1, false);
  net.emplace<BatchNorm2d>(store, "stem.bn", channels);
  net.emplace<Relu>();
  for (size_t s = 0; s < options.stageChannels.size(); ++s) {
    const int out = options.stageChannels[s];
    for (int b = 0; b < options.blocksPerStage; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      net.emplace<ResidualBlock>(store, fmt::format("stage{}.block{}", s + 1, b), channels, out,
                                 stride);
      channels = out;
    }
  }
  net.emplace<GlobalAvgPool>();
  net.emplace<Linear>(store, "fc", channels, options.classes);
  store.finalize(seed);
  return model;
}

std::unique_ptr<Model> makeModel(const std::string& name, uint64_t seed) {
  if (name == "mlp") return makeMlp(seed);
  if (name == "resnet") return makeResNet(seed);
  fail(ErrorCode::kInvalidUsage, "unknown model '{}' (want mlp or resnet)", name);
}

}  // namespace braid::trainer
