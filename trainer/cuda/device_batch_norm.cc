#include "trainer/cuda/device_batch_norm.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

DeviceBatchNorm2d::DeviceBatchNorm2d(const LayerPlan& plan, CudaContext& ctx,
                                     const FlatBuffers& flat)
    : ctx_(ctx),
      c_(plan.out),
      momentum_(plan.momentum),
      eps_(plan.eps),
      gamma_(flat.params + plan.paramBegin),
      beta_(gamma_ + plan.out),
      dgamma_(flat.grads + plan.paramBegin),
      dbeta_(dgamma_ + plan.out),
      runningMean_(flat.buffers + plan.bufferBegin),
      runningVar_(runningMean_ + plan.out),
      invStd_(plan.out, "batch-norm 1/std") {
  paramBegin_ = plan.paramBegin;
}

const DeviceTensor& DeviceBatchNorm2d::forward(const DeviceTensor& x) {
  BRAID_ENFORCE(x.shape.size() >= 2 && x.dim(1) == c_, ErrorCode::kInvalidUsage,
                "device BatchNorm2d({}): input shape {}", c_, shapeString(x.shape));
  BatchNormArgs a;
  a.n = x.dim(0);
  a.c = c_;
  a.hw = x.perSample() / c_;
  a.momentum = momentum_;
  a.eps = eps_;
  a.training = training_;
  BRAID_ENFORCE(!training_ || a.n * a.hw > 1, ErrorCode::kInvalidUsage,
                "device BatchNorm2d({}): training needs more than one value per channel, input {}",
                c_, shapeString(x.shape));
  forwardWasTraining_ = training_;
  xhat_.resize(x.shape, ctx_);
  y_.resize(x.shape, ctx_);
  scratch_.resize(batchNormScratch(a), "batch-norm partial sums");
  batchNormForward(a, x.ptr(), gamma_, beta_, runningMean_, runningVar_, xhat_.ptr(),
                   invStd_.data(), y_.ptr(), scratch_.data(), ctx_.stream());
  return y_;
}

const DeviceTensor& DeviceBatchNorm2d::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device BatchNorm2d({}): backward with dy {} after forward output {}", c_,
                shapeString(dy.shape), shapeString(y_.shape));
  BatchNormArgs a;
  a.n = dy.dim(0);
  a.c = c_;
  a.hw = dy.perSample() / c_;
  a.training = forwardWasTraining_;
  dx_.resize(dy.shape, ctx_);
  scratch_.resize(batchNormScratch(a), "batch-norm partial sums");
  batchNormBackward(a, dy.ptr(), xhat_.ptr(), invStd_.data(), gamma_, dgamma_, dbeta_, dx_.ptr(),
                    scratch_.data(), ctx_.stream());
  return dx_;
}

}  // namespace braid::trainer::cuda
