// What the device model must mirror of a CPU Model: its layers, their sizes and where their
// parameters and buffers sit in the ParamStore's flat buffers. Plain C++ (no CUDA), so it is
// built and tested everywhere.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainer/nn/layer.h"
#include "trainer/nn/models.h"

namespace braid::trainer::cuda {

enum class LayerKind { kFlatten, kLinear, kRelu, kConv2d, kBatchNorm2d, kGlobalAvgPool, kResidual };

const char* layerKindName(LayerKind kind);

/// One layer of the plan. Offsets are into the ParamStore's flat parameter (and gradient) buffer
/// and its buffer of running statistics; the device model uses the same offsets.
struct LayerPlan {
  LayerKind kind = LayerKind::kRelu;
  int in = 0, out = 0;                    ///< Linear/Conv2d sizes; BatchNorm2d: channels in both
  int kernel = 0, stride = 1, pad = 0;    ///< Conv2d
  bool bias = false;                      ///< Linear always, Conv2d when it has one
  float momentum = 0.1f, eps = 1e-5f;     ///< BatchNorm2d
  size_t paramBegin = Layer::kNoParams;   ///< first parameter (weight; bias follows it)
  size_t bufferBegin = Layer::kNoParams;  ///< BatchNorm2d: running_mean, running_var after it
  /// kResidual: conv1, bn1, conv2, bn2, then proj conv and proj bn when it projects.
  std::vector<LayerPlan> children;

  /// Parameters this layer (and its children) own.
  size_t paramCount() const;
};

/// The plan of `model.net`'s top-level layers, in order. Throws kInvalidUsage naming a layer the
/// device path does not have (MaxPool2d) or parameters the plan would not cover exactly.
std::vector<LayerPlan> planModel(const Model& model);

/// "Linear(784->256) @0" lines, one per layer (children indented): for error messages and tests.
std::string describePlan(const std::vector<LayerPlan>& plan);

}  // namespace braid::trainer::cuda
