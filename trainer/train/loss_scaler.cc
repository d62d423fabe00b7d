#include "trainer/train/loss_scaler.h"

#include <cmath>
#include <limits>

#include "common/error.h"

namespace braid::trainer {

LossScaler::LossScaler(const LossScalerOptions& o)
    : scale_(o.fixedScale.value_or(o.initScale)),
      fixed_(o.fixedScale.has_value()),
      growthInterval_(o.growthInterval) {
  BRAID_ENFORCE(std::isfinite(scale_) && scale_ > 0, ErrorCode::kInvalidUsage,
                "loss scale {} must be positive and finite", scale_);
  BRAID_ENFORCE(growthInterval_ >= 1, ErrorCode::kInvalidUsage,
                "loss-scale growth interval {} must be at least 1", growthInterval_);
}

void LossScaler::update(bool overflow) {
  if (overflow) {
    ++skippedSteps_;
    goodSteps_ = 0;
    // Never reaches 0: below the smallest normal float the scale stops shrinking.
    if (!fixed_ && scale_ > std::numeric_limits<float>::min()) scale_ *= 0.5f;
    return;
  }
  if (++goodSteps_ >= growthInterval_) {
    goodSteps_ = 0;
    // Doubling past float's range would make every step overflow; stay finite.
    if (!fixed_ && scale_ < std::numeric_limits<float>::max() / 2) scale_ *= 2.0f;
  }
}

void LossScaler::restore(float scale, int64_t goodSteps, int64_t skippedSteps) {
  BRAID_ENFORCE(std::isfinite(scale) && scale > 0 && goodSteps >= 0 && skippedSteps >= 0,
                ErrorCode::kInvalidUsage,
                "checkpoint holds an invalid loss scale {} (good steps {}, skipped {})", scale,
                goodSteps, skippedSteps);
  if (!fixed_) scale_ = scale;
  goodSteps_ = goodSteps;
  skippedSteps_ = skippedSteps;
}

}  // namespace braid::trainer
