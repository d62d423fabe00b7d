// nn's Optimizer on device buffers: the same update formulas (kernels.h) and state layout (one
// flat first moment / momentum buffer, one second moment), stepped per gradient bucket. The
// learning rate schedule and the step count are the host Optimizer's, which it wraps.
#pragma once

#include <cstddef>

#include "trainer/cuda/context.h"
#include "trainer/nn/optimizer.h"

namespace braid::trainer::cuda {

class DeviceOptimizer {
 public:
  DeviceOptimizer(const OptimizerOptions& options, size_t numParams, CudaContext& ctx);

  float learningRate() const { return schedule_.learningRate(); }
  int64_t stepCount() const { return schedule_.stepCount(); }
  const OptimizerOptions& options() const { return schedule_.options(); }

  /// Enqueues the next step's update of elements [begin, end) on `stream`.
  void stepRange(float* params, const float* grads, size_t begin, size_t end, cudaStream_t stream);
  void finishStep() { schedule_.finishStep(); }
  void step(float* params, const float* grads, cudaStream_t stream);

 private:
  Optimizer schedule_;  // the learning rate and the step count; its moments unused
  size_t n_;
  DeviceBuffer<float> m_, v_;
};

}  // namespace braid::trainer::cuda
