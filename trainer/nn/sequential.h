// A chain of layers run in order forward and in reverse backward.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "trainer/nn/layer.h"

namespace braid::trainer {

/// Owns its layers and runs them in sequence. Forward order = parameter registration order, so
/// backward produces gradients from the end of the flat buffer towards its start.
class Sequential : public Layer {
 public:
  /// Appends a layer; returns a reference to it.
  template <typename L, typename... Args>
  L& emplace(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *layer;
    add(std::move(layer));
    return ref;
  }
  void add(std::unique_ptr<Layer> layer);

  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy) override;
  /// forward()/backward() over the contiguous layers [first, last) only (a pipeline stage):
  /// the same per-layer calls, hook included. Throws kInvalidUsage on an empty or bad range.
  const Tensor& forwardRange(size_t first, size_t last, const Tensor& x);
  const Tensor& backwardRange(size_t first, size_t last, const Tensor& dy);
  void setTraining(bool training) override;
  std::string describe() const override;
  double flopsPerSample() const override;

  /// Called during backward() after each child layer that has parameters, with the smallest
  /// flat offset whose gradient is complete for this backward: every gradient at offsets
  /// >= `readyFrom` is final. Lets the trainer start a bucket's all-reduce while the rest of
  /// backward runs. Called on the backward() caller's thread; must not call back into the model.
  void setGradReadyHook(std::function<void(size_t readyFrom)> hook) { hook_ = std::move(hook); }

  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  const Layer& layer(size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::function<void(size_t)> hook_;
};

}  // namespace braid::trainer
