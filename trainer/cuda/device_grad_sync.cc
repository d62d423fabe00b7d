#include "trainer/cuda/device_grad_sync.h"

#include "trainer/cuda/cuda_check.h"

namespace braid::trainer::cuda {

DeviceGradSync::DeviceGradSync(DeviceCommunicator* comm, CudaContext& ctx, float* grads,
                               const std::vector<size_t>& paramOffsets, size_t numParams,
                               size_t bucketElems)
    : comm_(comm),
      ctx_(ctx),
      grads_(grads),
      buckets_(makeBuckets(paramOffsets, numParams, bucketElems)) {
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

void DeviceGradSync::start(size_t b) {
  if (comm_ == nullptr) return;
  const Bucket& k = buckets_[b];
  BRAID_CUDA_CHECK(cudaEventRecord(ready_[b], ctx_.stream()), "bucket {} [{}, {})", b, k.begin,
                   k.end);
  BRAID_CUDA_CHECK(cudaStreamWaitEvent(commStream_, ready_[b], 0), "bucket {} [{}, {})", b, k.begin,
                   k.end);
  float* p = grads_ + k.begin;
  comm_->allReduce(p, p, k.end - k.begin, DataType::kFloat32, RedOp::kAvg, CudaStream{commStream_});
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

}  // namespace braid::trainer::cuda
