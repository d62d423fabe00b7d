// SGD (momentum, weight decay), Adam and AdamW over the flat parameter and gradient buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::trainer {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

/// "sgd", "adam", "adamw"; throws kInvalidUsage on another name.
OptimizerKind parseOptimizerKind(const std::string& name);
const char* optimizerKindName(OptimizerKind kind);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.1f;           ///< base learning rate (before warm-up and scaling)
  float momentum = 0.9f;     ///< SGD only; 0 disables the momentum buffer
  float weightDecay = 0.0f;  ///< SGD/Adam: L2 added to the gradient; AdamW: decoupled decay
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  int64_t warmupSteps = 0;     ///< linear warm-up: step t (0-based) uses lr * (t+1)/K for t < K
  bool linearScaling = false;  ///< Goyal et al. 2017: lr x globalBatch / 256
  int64_t globalBatch = 256;   ///< used by linearScaling
  /// Cosine decay: from the end of warm-up to step decaySteps the rate falls along half a cosine
  /// to 0 (lr * (1 + cos(pi * progress)) / 2); 0 keeps it constant.
  int64_t decaySteps = 0;
};

/// Updates the flat parameters from the flat gradients, element by element, following PyTorch's
/// torch.optim definitions (nesterov off, no dampening, amsgrad off):
///   SGD:   g += wd*p;  b = g on the first step, else b = momentum*b + g;  p -= lr*b
///   Adam:  g += wd*p;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
///          p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)          (t = 1, 2, ...)
///   AdamW: p *= 1 - lr*wd, then Adam without the wd term.
/// One step may be applied in slices (stepRange per gradient bucket, in any order, each element
/// exactly once) followed by finishStep(); step() does both for the whole buffer.
class Optimizer {
 public:
  Optimizer(const OptimizerOptions& options, size_t numParams);

  /// The learning rate the next step will use (warm-up and linear scaling applied).
  float learningRate() const;
  /// Steps completed so far.
  int64_t stepCount() const { return step_; }
  const OptimizerOptions& options() const { return options_; }

  /// Applies the next step to elements [begin, end) of the flat buffers.
  void stepRange(float* params, const float* grads, size_t begin, size_t end);
  /// Ends the step started by stepRange calls.
  void finishStep() { ++step_; }
  /// stepRange over everything, then finishStep().
  void step(float* params, const float* grads);

  /// Serialises kind, parameter count, step and moments (little-endian host floats, with a
  /// magic and version). loadState() refuses state of another kind or size with kInvalidUsage.
  std::vector<char> saveState() const;
  void loadState(const char* data, size_t size);

 private:
  OptimizerOptions options_;
  size_t n_;
  int64_t step_ = 0;
  std::vector<float> m_;  // SGD momentum buffer, or Adam first moment
  std::vector<float> v_;  // Adam second moment
};

}  // namespace braid::trainer
