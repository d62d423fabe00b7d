// "--partition time": the measured forward + backward seconds of each top-level layer.
#pragma once

#include <vector>

#include "trainer/nn/models.h"

namespace braid::trainer {

/// Times each top-level layer's forward and backward on a `batch`-sample batch (constant
/// input, dL/dy = 1), `repeats` times, and returns each layer's fastest total in seconds. Leaves
/// the parameters, gradients (zeroed) and batch-norm running statistics as it found them
/// (gradients are zero afterwards: call it before training).
std::vector<double> measureLayerSeconds(Model& model, int batch, int repeats = 3);

}  // namespace braid::trainer
