#include "trainer/cuda/device_grad_sync.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/half_kernels.h"

namespace braid::trainer::cuda {

DeviceGradSync::DeviceGradSync(DeviceCommunicator* comm, CudaContext& ctx, float* grads,
                               const std::vector<size_t>& paramOffsets, size_t numParams,
                               size_t bucketElems)
    : comm_(comm),
      ctx_(ctx),
      grads_(grads),
      buckets_(makeBuckets(paramOffsets, numParams, bucketElems)),
      numParams_(numParams) {
  if (comm_ == nullptr) return;
  BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(&commStream_, cudaStreamNonBlocking),
                   "gradient all-reduce stream");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (auto* events : {&ready_, &done_}) {
      cudaEvent_t e = nullptr;
      BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "bucket {} of {}", b,
                       buckets_.size());
      events->push_back(e);
    }
  }
}

DeviceGradSync::~DeviceGradSync() {
  if (commStream_) cudaStreamSynchronize(commStream_);
  for (cudaEvent_t e : ready_) cudaEventDestroy(e);
  for (cudaEvent_t e : done_) cudaEventDestroy(e);
  if (commStream_) cudaStreamDestroy(commStream_);
}

void DeviceGradSync::arm() {
  armed_ = true;
  started_ = 0;
}

void DeviceGradSync::setHalfPrecision(bool on) {
  BRAID_ENFORCE(!armed_, ErrorCode::kInvalidUsage,
                "DeviceGradSync: setHalfPrecision() between arm() and the step");
  half_ = on;
  if (on) {
    halfGrads_.resize(numParams_, "half gradients");
    overflow_.resize(1, "overflow flag");
  }
}

void DeviceGradSync::start(size_t b) {
  const Bucket& k = buckets_[b];
  if (half_) {
    floatToHalf(grads_ + k.begin, halfGrads_.data() + k.begin, k.end - k.begin, ctx_.stream());
  }
  if (comm_ == nullptr) return;
  BRAID_CUDA_CHECK(cudaEventRecord(ready_[b], ctx_.stream()), "bucket {} [{}, {})", b, k.begin,
                   k.end);
  BRAID_CUDA_CHECK(cudaStreamWaitEvent(commStream_, ready_[b], 0), "bucket {} [{}, {})", b, k.begin,
                   k.end);
  if (half_) {
    __half* h = halfGrads_.data() + k.begin;
    comm_->allReduce(h, h, k.end - k.begin, DataType::kFloat16, RedOp::kAvg,
                     CudaStream{commStream_});
  } else {
    float* p = grads_ + k.begin;
    comm_->allReduce(p, p, k.end - k.begin, DataType::kFloat32, RedOp::kAvg,
                     CudaStream{commStream_});
  }
  BRAID_CUDA_CHECK(cudaEventRecord(done_[b], commStream_), "bucket {} [{}, {})", b, k.begin, k.end);
}

void DeviceGradSync::onGradReady(size_t readyFrom) {
  if (!armed_) return;
  while (started_ < buckets_.size() && buckets_[started_].begin >= readyFrom) start(started_++);
}

void DeviceGradSync::finishBackward() {
  if (!armed_) return;
  while (started_ < buckets_.size()) start(started_++);
}

void DeviceGradSync::step(DeviceOptimizer& opt, float* params) {
  BRAID_ENFORCE(armed_, ErrorCode::kInvalidUsage, "DeviceGradSync: step() without arm()");
  BRAID_ENFORCE(!half_, ErrorCode::kInvalidUsage, "DeviceGradSync: fp16 steps with stepScaled()");
  finishBackward();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (comm_ != nullptr) {
      BRAID_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), done_[b], 0), "bucket {} of {}", b,
                       buckets_.size());
    }
    opt.stepRange(params, grads_, buckets_[b].begin, buckets_[b].end, ctx_.stream());
  }
  opt.finishStep();
  armed_ = false;
}

bool DeviceGradSync::stepScaled(DeviceOptimizer& opt, float* params, LossScaler& scaler) {
  BRAID_ENFORCE(armed_ && half_, ErrorCode::kInvalidUsage,
                "DeviceGradSync: stepScaled() needs arm() and setHalfPrecision(true)");
  finishBackward();
  cudaStream_t s = ctx_.stream();
  BRAID_CUDA_CHECK(cudaMemsetAsync(overflow_.data(), 0, sizeof(int32_t), s), "overflow flag");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    if (comm_ != nullptr) {
      BRAID_CUDA_CHECK(cudaStreamWaitEvent(s, done_[b], 0), "bucket {} of {}", b, buckets_.size());
    }
    unscaleHalf(halfGrads_.data() + k.begin, grads_ + k.begin, k.end - k.begin, scaler.scale(),
                overflow_.data(), s);
  }
  armed_ = false;
  // The ranks see the same averaged halves, but a skip must never depend on that: one int per
  // step makes the decision explicitly collective (as the CPU path).
  if (comm_ != nullptr) {
    comm_->allReduce(overflow_.data(), overflow_.data(), 1, DataType::kInt32, RedOp::kMax,
                     CudaStream{s});
  }
  int32_t overflow = 0;
  BRAID_CUDA_CHECK(
      cudaMemcpyAsync(&overflow, overflow_.data(), sizeof(int32_t), cudaMemcpyDeviceToHost, s),
      "overflow flag to the host");
  ctx_.synchronize();
  const bool skipped = overflow != 0;
  if (!skipped) {
    for (const Bucket& k : buckets_) opt.stepRange(params, grads_, k.begin, k.end, s);
    opt.finishStep();
  }
  scaler.update(skipped);
  return skipped;
}

}  // namespace braid::trainer::cuda
