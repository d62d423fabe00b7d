// SoftmaxCrossEntropy on the device: the batch's loss sum and correct count stay on the device
// until fetch() enqueues their copy back; result() waits for that copy only (not for work
// enqueued after it), so a trainer can read step k's loss while step k+1 runs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/cuda/device_tensor.h"
#include "trainer/cuda/kernels.h"
#include "trainer/nn/loss.h"

namespace braid::trainer::cuda {

class DeviceSoftmaxCrossEntropy {
 public:
  explicit DeviceSoftmaxCrossEntropy(CudaContext& ctx);
  ~DeviceSoftmaxCrossEntropy();
  DeviceSoftmaxCrossEntropy(const DeviceSoftmaxCrossEntropy&) = delete;
  DeviceSoftmaxCrossEntropy& operator=(const DeviceSoftmaxCrossEntropy&) = delete;

  /// Copies `labels` to the device and enqueues the loss of `logits` [N, K].
  void forward(const DeviceTensor& logits, std::span<const int32_t> labels);
  /// Enqueues the copy of the last forward's sums to the host (behind everything on the stream).
  void fetch();
  /// fetch() unless done since the last forward, then waits for the copy and returns the mean
  /// loss and correct count (as nn's). Throws kInvalidUsage naming a label outside [0, K).
  LossResult result();
  /// dL/dlogits of the last forward, scaled by `scale`.
  const DeviceTensor& backward(float scale = 1.0f);

 private:
  CudaContext& ctx_;
  DeviceBuffer<int32_t> labels_;
  int32_t* hostLabels_ = nullptr;  // pinned staging of the labels (a pageable copy may wait)
  size_t hostLabelsCapacity_ = 0;
  cudaEvent_t labelsCopied_ = nullptr;  // the staging may be refilled once this has passed
  DeviceBuffer<LossSums> sums_;
  LossSums* hostSums_ = nullptr;   // pinned
  cudaEvent_t fetched_ = nullptr;  // recorded behind the copy into hostSums_
  bool pending_ = false;           // a forward whose sums are not fetched yet
  int n_ = 0, k_ = 0;
  DeviceTensor probs_, dlogits_;
};

}  // namespace braid::trainer::cuda
