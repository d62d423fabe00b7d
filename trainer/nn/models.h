// The two bundled models: an MLP and a small ResNet for 1x28x28 images with 10 classes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/nn/param_store.h"
#include "trainer/nn/sequential.h"

namespace braid::trainer {

/// A model: its flat parameter store and its layers. Not movable (layers refer to the store);
/// hold it by unique_ptr.
struct Model {
  std::string name;
  ParamStore store;
  Sequential net;
  std::vector<int> inputShape;  ///< per sample, e.g. {1, 28, 28}
  int numClasses = 10;

  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
};

struct MlpOptions {
  int inputs = 784;
  std::vector<int> hidden = {256, 128};
  int classes = 10;
};

/// Flatten -> Linear(784, 256) -> ReLU -> Linear(256, 128) -> ReLU -> Linear(128, 10) by default.
/// Parameters are initialised from `seed` (see ParamStore::initialise). 235,146 parameters;
/// forward 2 x 234,752 multiply-adds = 469,504 FLOP per sample.
std::unique_ptr<Model> makeMlp(uint64_t seed, const MlpOptions& options = {});

struct ResNetOptions {
  int inChannels = 1;
  int classes = 10;
  std::vector<int> stageChannels = {16, 32, 64};  ///< stage i > 0 halves H and W (stride 2)
  int blocksPerStage = 1;
};

/// A small ResNet for [N, 1, 28, 28] by default:
///   stem Conv2d 3x3 1->16 (no bias) + BatchNorm2d + ReLU            28x28
///   stage 1: ResidualBlock 16->16 stride 1 (identity shortcut)      28x28
///   stage 2: ResidualBlock 16->32 stride 2 (1x1 projection)         14x14
///   stage 3: ResidualBlock 32->64 stride 2 (1x1 projection)          7x7
///   GlobalAvgPool -> Linear(64, 10)
/// 77,754 parameters (BN running statistics excluded); forward 18,691,840 FLOP per sample
/// (GEMM multiply-adds x 2; 18.7 MFLOP), so a training step costs about 3x that, ~56 MFLOP per
/// sample (checked by models_test).
std::unique_ptr<Model> makeResNet(uint64_t seed, const ResNetOptions& options = {});

/// "mlp" or "resnet" with default options; throws kInvalidUsage on another name.
std::unique_ptr<Model> makeModel(const std::string& name, uint64_t seed);

}  // namespace braid::trainer
