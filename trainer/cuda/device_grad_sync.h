// GradSync on the device: the same buckets (makeBuckets), each all-reduced (RedOp::kAvg) through
// the DeviceCommunicator on a communication stream as soon as backward has enqueued its last
// gradient, and the optimizer stepped per bucket on the compute stream behind that bucket's
// all-reduce. Nothing blocks the host: the streams order everything (fp16: but for the overflow
// flag, which the host reads to decide whether the optimizer steps).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/cuda/context.h"
#include "trainer/cuda/device_optimizer.h"
#include "trainer/train/grad_sync.h"
#include "trainer/train/loss_scaler.h"

namespace braid::trainer::cuda {

class DeviceGradSync {
 public:
  /// `comm`: the ranks' device communicator, or nullptr with one rank (nothing to average).
  /// `grads`: the device model's flat gradients; the other arguments as makeBuckets().
  DeviceGradSync(DeviceCommunicator* comm, CudaContext& ctx, float* grads,
                 const std::vector<size_t>& paramOffsets, size_t numParams, size_t bucketElems);
  ~DeviceGradSync();
  DeviceGradSync(const DeviceGradSync&) = delete;
  DeviceGradSync& operator=(const DeviceGradSync&) = delete;

  /// Lets the next onGradReady()/finishBackward() calls start all-reduces (one step's worth).
  void arm();
  /// Gradients at offsets >= readyFrom are enqueued: start the buckets they complete.
  void onGradReady(size_t readyFrom);
  /// Backward is enqueued: start every bucket not yet started.
  void finishBackward();
  /// Enqueues, per bucket in order, the wait for its all-reduce and the optimizer step on it;
  /// then ends the optimizer step.
  void step(DeviceOptimizer& opt, float* params);

  /// fp16 (GradSync's setHalfPrecision on the device): each bucket's (scaled) float32 gradients
  /// are converted to half on the compute stream when it starts and all-reduced as
  /// DataType::kFloat16 with kAvg (half the bytes). Call before arm().
  void setHalfPrecision(bool on);
  bool halfPrecision() const { return half_; }
  /// The fp16 step, as GradSync::stepAndWaitScaled: every bucket converted back to float32
  /// divided by scaler.scale() with an inf/NaN flag on the device; the ranks' flags combined
  /// with one allReduce(kInt32, kMax); the host waits for that flag, then either every rank
  /// steps the optimizer on every bucket or none does. Updates `scaler` either way. Returns true
  /// when the step was skipped.
  bool stepScaled(DeviceOptimizer& opt, float* params, LossScaler& scaler);

  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  DeviceCommunicator* comm_;
  CudaContext& ctx_;
  float* grads_;
  std::vector<Bucket> buckets_;
  cudaStream_t commStream_ = nullptr;
  std::vector<cudaEvent_t> ready_, done_;  // per bucket: gradients enqueued, all-reduce done
  size_t started_ = 0;
  bool armed_ = false;
  bool half_ = false;
  size_t numParams_;
  DeviceBuffer<__half> halfGrads_;  // fp16: bucket b at [b.begin, b.end), like grads_
  DeviceBuffer<int32_t> overflow_;  // fp16: 1 where some unscaled gradient is inf or NaN

  void start(size_t b);
};

}  // namespace braid::trainer::cuda
