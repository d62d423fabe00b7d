#include "trainer/cuda/layer_plan.h"

#include <fmt/format.h>

#include <typeinfo>

#include "common/error.h"
#include "trainer/nn/batch_norm.h"
#include "trainer/nn/conv2d.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/pooling.h"
#include "trainer/nn/relu.h"
#include "trainer/nn/residual.h"

namespace braid::trainer::cuda {
namespace {

LayerPlan planConv(const Conv2d& c) {
  LayerPlan p;
  p.kind = LayerKind::kConv2d;
  p.in = c.in();
  p.out = c.out();
  p.kernel = c.kernel();
  p.stride = c.stride();
  p.pad = c.pad();
  p.bias = c.hasBias();
  p.paramBegin = c.paramBegin();
  return p;
}

LayerPlan planBatchNorm(const BatchNorm2d& b) {
  LayerPlan p;
  p.kind = LayerKind::kBatchNorm2d;
  p.in = p.out = b.channels();
  p.momentum = b.momentum();
  p.eps = b.eps();
  p.paramBegin = b.paramBegin();
  p.bufferBegin = b.bufferBegin();
  return p;
}

LayerPlan planLayer(const Layer& layer) {
  LayerPlan p;
  if (const auto* l = dynamic_cast<const Linear*>(&layer)) {
    p.kind = LayerKind::kLinear;
    p.in = l->in();
    p.out = l->out();
    p.bias = true;
    p.paramBegin = l->paramBegin();
  } else if (const auto* c = dynamic_cast<const Conv2d*>(&layer)) {
    p = planConv(*c);
  } else if (const auto* b = dynamic_cast<const BatchNorm2d*>(&layer)) {
    p = planBatchNorm(*b);
  } else if (dynamic_cast<const Relu*>(&layer)) {
    p.kind = LayerKind::kRelu;
  } else if (dynamic_cast<const Flatten*>(&layer)) {
    p.kind = LayerKind::kFlatten;
  } else if (dynamic_cast<const GlobalAvgPool*>(&layer)) {
    p.kind = LayerKind::kGlobalAvgPool;
  } else if (const auto* r = dynamic_cast<const ResidualBlock*>(&layer)) {
    p.kind = LayerKind::kResidual;
    p.paramBegin = r->paramBegin();
    p.children = {planConv(r->conv1()), planBatchNorm(r->bn1()), planConv(r->conv2()),
                  planBatchNorm(r->bn2())};
    if (r->projConv()) {
      p.children.push_back(planConv(*r->projConv()));
      p.children.push_back(planBatchNorm(*r->projBn()));
    }
  } else {
    fail(ErrorCode::kInvalidUsage, "--device cuda: no device version of layer {}",
         layer.describe());
  }
  return p;
}

// Appends every parameterised leaf's (offset, count) in plan order.
void leafRanges(const LayerPlan& p, std::vector<std::pair<size_t, size_t>>& out) {
  if (p.kind == LayerKind::kResidual) {
    for (const LayerPlan& c : p.children) leafRanges(c, out);
  } else if (p.paramBegin != Layer::kNoParams) {
    out.emplace_back(p.paramBegin, p.paramCount());
  }
}

}  // namespace

const char* layerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kFlatten:
      return "Flatten";
    case LayerKind::kLinear:
      return "Linear";
    case LayerKind::kRelu:
      return "ReLU";
    case LayerKind::kConv2d:
      return "Conv2d";
    case LayerKind::kBatchNorm2d:
      return "BatchNorm2d";
    case LayerKind::kGlobalAvgPool:
      return "GlobalAvgPool";
    case LayerKind::kResidual:
      return "ResidualBlock";
  }
  return "?";
}

size_t LayerPlan::paramCount() const {
  switch (kind) {
    case LayerKind::kLinear:
      return static_cast<size_t>(out) * in + out;
    case LayerKind::kConv2d:
      return static_cast<size_t>(out) * in * kernel * kernel + (bias ? out : 0);
    case LayerKind::kBatchNorm2d:
      return 2 * static_cast<size_t>(out);
    case LayerKind::kResidual: {
      size_t n = 0;
      for (const LayerPlan& c : children) n += c.paramCount();
      return n;
    }
    default:
      return 0;
  }
}

std::vector<LayerPlan> planModel(const Model& model) {
  std::vector<LayerPlan> plan;
  for (size_t i = 0; i < model.net.size(); ++i) plan.push_back(planLayer(model.net.layer(i)));
  // The device model writes parameters by these offsets: they must tile the flat buffer.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const LayerPlan& p : plan) leafRanges(p, ranges);
  size_t next = 0;
  for (const auto& [begin, count] : ranges) {
    BRAID_ENFORCE(begin == next, ErrorCode::kInvalidUsage,
                  "--device cuda: model '{}' has parameters at {} where the plan expects {}:\n{}",
                  model.name, begin, next, describePlan(plan));
    next = begin + count;
  }
  BRAID_ENFORCE(next == model.store.numParams(), ErrorCode::kInvalidUsage,
                "--device cuda: the plan of model '{}' covers {} of its {} parameters:\n{}",
                model.name, next, model.store.numParams(), describePlan(plan));
  return plan;
}

namespace {
void describeInto(const LayerPlan& p, int depth, std::string& out) {
  out += fmt::format("{:{}}{}({}->{}", "", 2 * depth, layerKindName(p.kind), p.in, p.out);
  if (p.kind == LayerKind::kConv2d) out += fmt::format(", k{} s{} p{}", p.kernel, p.stride, p.pad);
  out += ")";
  if (p.paramBegin != Layer::kNoParams) out += fmt::format(" @{}", p.paramBegin);
  if (p.bufferBegin != Layer::kNoParams) out += fmt::format(" buffers @{}", p.bufferBegin);
  out += "\n";
  for (const LayerPlan& c : p.children) describeInto(c, depth + 1, out);
}
}  // namespace

std::string describePlan(const std::vector<LayerPlan>& plan) {
  std::string out;
  for (const LayerPlan& p : plan) describeInto(p, 0, out);
  return out;
}

}  // namespace braid::trainer::cuda
