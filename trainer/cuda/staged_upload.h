// Host-to-device copies of the input batches through pinned staging memory: a copy from pageable
// memory may make the host wait for the work already on the stream, a pinned one is only queued,
// so the host can load the next batch while the GPU still runs the last step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "trainer/cuda/device_tensor.h"

namespace braid::trainer::cuda {

/// Two pinned buffers used in turn; a buffer is refilled only after its last copy has finished
/// (an event per buffer), so the host never overwrites what the GPU has yet to read.
class StagedUpload {
 public:
  explicit StagedUpload(CudaContext& ctx);
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;

  /// Copies `host` into `device` (resized to its shape) on the context's stream.
  void operator()(const Tensor& host, DeviceTensor& device);

 private:
  struct Slot {
    float* pinned = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;
  };
  CudaContext& ctx_;
  Slot slots_[2];
  int next_ = 0;
};

}  // namespace braid::trainer::cuda
