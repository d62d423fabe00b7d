#include "trainer/cuda/device_optimizer.h"

#include <cmath>

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

DeviceOptimizer::DeviceOptimizer(const OptimizerOptions& options, size_t numParams,
                                 CudaContext& ctx)
    : schedule_(options, numParams), n_(numParams) {
  const bool sgd = options.kind == OptimizerKind::kSgd;
  if (!sgd || options.momentum != 0.0f) m_.resize(n_, "optimizer first moment");
  if (!sgd) v_.resize(n_, "optimizer second moment");
  for (DeviceBuffer<float>* b : {&m_, &v_}) {
    if (b->size() > 0) {
      BRAID_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->size() * sizeof(float), ctx.stream()),
                       "optimizer state of {} floats", b->size());
    }
  }
}

void DeviceOptimizer::stepRange(float* params, const float* grads, size_t begin, size_t end,
                                cudaStream_t stream) {
  const OptimizerOptions& o = schedule_.options();
  BRAID_ENFORCE(begin <= end && end <= n_, ErrorCode::kInvalidUsage,
                "device optimizer {}: range [{}, {}) outside {} parameters",
                optimizerKindName(o.kind), begin, end, n_);
  const float lr = schedule_.learningRate();
  const size_t count = end - begin;
  if (o.kind == OptimizerKind::kSgd) {
    float* mom = m_.size() > 0 ? m_.data() + begin : nullptr;
    sgdStep(params + begin, grads + begin, mom, count, lr, o.weightDecay, o.momentum,
            schedule_.stepCount() == 0, stream);
    return;
  }
  // The scalars exactly as Optimizer::stepRange computes them on the host.
  const double t = static_cast<double>(schedule_.stepCount() + 1);
  AdamArgs a;
  a.stepSize = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(o.beta1), t)));
  a.sqrtBc2 = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(o.beta2), t)));
  a.b1 = o.beta1;
  a.b2 = o.beta2;
  a.eps = o.eps;
  const bool decoupled = o.kind == OptimizerKind::kAdamW;
  a.decay = decoupled ? 1.0f - lr * o.weightDecay : 1.0f;
  a.l2 = decoupled ? 0.0f : o.weightDecay;
  adamStep(params + begin, grads + begin, m_.data() + begin, v_.data() + begin, count, a, stream);
}

void DeviceOptimizer::step(float* params, const float* grads, cudaStream_t stream) {
  stepRange(params, grads, 0, n_, stream);
  finishStep();
}

}  // namespace braid::trainer::cuda
