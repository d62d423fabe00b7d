// Dynamic loss scaling for fp16 mixed precision, like torch.cuda.amp.GradScaler.
#pragma once

#include <cstdint>
#include <optional>

namespace braid::trainer {

/// Settings of a LossScaler.
struct LossScalerOptions {
  float initScale = 65536.0f;       ///< --init-scale: the first scale of a dynamic scaler
  std::optional<float> fixedScale;  ///< --loss-scale: a scale that never changes
  int64_t growthInterval = 2000;    ///< good steps in a row after which the scale doubles
};

/// The loss scale and its update rule: the loss gradient is multiplied by scale() before
/// backward and the all-reduced gradients are divided by it. update(overflow) after every step:
/// an overflow (inf/NaN in any rank's gradients, agreed on by all ranks) means the step was
/// skipped and a dynamic scale halves; growthInterval good steps in a row double it. A fixed
/// scale only counts. Every rank holds an identical scaler (the inputs are identical).
class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  float scale() const { return scale_; }
  bool dynamic() const { return !fixed_; }
  /// Good steps since the last overflow or growth.
  int64_t goodSteps() const { return goodSteps_; }
  /// Steps skipped since the start of the run.
  int64_t skippedSteps() const { return skippedSteps_; }

  /// Records a step's outcome; `overflow`: the step was skipped.
  void update(bool overflow);
  /// Restores state from a checkpoint (the scale is ignored when the scale is fixed).
  void restore(float scale, int64_t goodSteps, int64_t skippedSteps);

 private:
  float scale_;
  bool fixed_;
  int64_t growthInterval_;
  int64_t goodSteps_ = 0;
  int64_t skippedSteps_ = 0;
};

}  // namespace braid::trainer
