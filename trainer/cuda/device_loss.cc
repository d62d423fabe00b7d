#include "trainer/cuda/device_loss.h"

#include <algorithm>

#include "trainer/cuda/cuda_check.h"

namespace braid::trainer::cuda {

DeviceSoftmaxCrossEntropy::DeviceSoftmaxCrossEntropy(CudaContext& ctx)
    : ctx_(ctx), sums_(1, "loss sums") {
  BRAID_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&hostSums_), sizeof(LossSums)),
                   "{} bytes pinned", sizeof(LossSums));
  BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&fetched_, cudaEventDisableTiming), "loss event");
  BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&labelsCopied_, cudaEventDisableTiming),
                   "labels event");
  BRAID_CUDA_CHECK(cudaEventRecord(labelsCopied_, ctx_.stream()), "labels event");
}

DeviceSoftmaxCrossEntropy::~DeviceSoftmaxCrossEntropy() {
  if (fetched_) {
    cudaEventSynchronize(fetched_);
    cudaEventDestroy(fetched_);
  }
  if (labelsCopied_) {
    cudaEventSynchronize(labelsCopied_);
    cudaEventDestroy(labelsCopied_);
  }
  if (hostSums_) cudaFreeHost(hostSums_);
  if (hostLabels_) cudaFreeHost(hostLabels_);
}

void DeviceSoftmaxCrossEntropy::forward(const DeviceTensor& logits,
                                        std::span<const int32_t> labels) {
  BRAID_ENFORCE(logits.shape.size() == 2 && labels.size() == static_cast<size_t>(logits.dim(0)),
                ErrorCode::kInvalidUsage,
                "device SoftmaxCrossEntropy: logits {} with {} labels (want [N, K] and N labels)",
                shapeString(logits.shape), labels.size());
  n_ = logits.dim(0);
  k_ = logits.dim(1);
  labels_.resize(labels.size(), "labels");
  BRAID_CUDA_CHECK(cudaEventSynchronize(labelsCopied_), "{} labels", labels.size());
  if (labels.size() > hostLabelsCapacity_) {
    if (hostLabels_) BRAID_CUDA_CHECK(cudaFreeHost(hostLabels_), "{} labels", hostLabelsCapacity_);
    hostLabels_ = nullptr;
    BRAID_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&hostLabels_), labels.size() * sizeof(int32_t)),
        "{} pinned labels", labels.size());
    hostLabelsCapacity_ = labels.size();
  }
  std::copy(labels.begin(), labels.end(), hostLabels_);
  BRAID_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), hostLabels_, labels.size() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, ctx_.stream()),
                   "{} labels", labels.size());
  BRAID_CUDA_CHECK(cudaEventRecord(labelsCopied_, ctx_.stream()), "{} labels", labels.size());
  probs_.resize(logits.shape, ctx_);
  softmaxCrossEntropyForward(logits.ptr(), labels_.data(), n_, k_, probs_.ptr(), sums_.data(),
                             ctx_.stream());
  pending_ = true;
}

void DeviceSoftmaxCrossEntropy::fetch() {
  BRAID_ENFORCE(n_ > 0, ErrorCode::kInvalidUsage,
                "device SoftmaxCrossEntropy: fetch before forward");
  BRAID_CUDA_CHECK(cudaMemcpyAsync(hostSums_, sums_.data(), sizeof(LossSums),
                                   cudaMemcpyDeviceToHost, ctx_.stream()),
                   "loss of a batch of {}", n_);
  BRAID_CUDA_CHECK(cudaEventRecord(fetched_, ctx_.stream()), "loss of a batch of {}", n_);
  pending_ = false;
}

LossResult DeviceSoftmaxCrossEntropy::result() {
  if (pending_) fetch();
  BRAID_CUDA_CHECK(cudaEventSynchronize(fetched_), "loss of a batch of {}", n_);
  BRAID_ENFORCE(hostSums_->badLabel < 0, ErrorCode::kInvalidUsage,
                "device SoftmaxCrossEntropy: the label of sample {} is outside [0, {})",
                hostSums_->badLabel, k_);
  LossResult r;
  r.count = n_;
  r.correct = hostSums_->correct;
  r.loss = n_ > 0 ? hostSums_->lossSum / n_ : 0.0;
  return r;
}

const DeviceTensor& DeviceSoftmaxCrossEntropy::backward(float scale) {
  BRAID_ENFORCE(n_ > 0, ErrorCode::kInvalidUsage,
                "device SoftmaxCrossEntropy: backward before forward");
  dlogits_.resize(probs_.shape, ctx_);
  softmaxCrossEntropyBackward(probs_.ptr(), labels_.data(), n_, k_, scale, dlogits_.ptr(),
                              ctx_.stream());
  return dlogits_;
}

}  // namespace braid::trainer::cuda
