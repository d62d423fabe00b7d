#include "trainer/cuda/staged_upload.h"

#include <cstring>

#include "trainer/cuda/cuda_check.h"

namespace braid::trainer::cuda {

StagedUpload::StagedUpload(CudaContext& ctx) : ctx_(ctx) {
  for (Slot& s : slots_) {
    BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming), "input slot");
    BRAID_CUDA_CHECK(cudaEventRecord(s.copied, ctx_.stream()), "input slot");
  }
}

StagedUpload::~StagedUpload() {
  for (Slot& s : slots_) {
    if (s.copied) {
      cudaEventSynchronize(s.copied);
      cudaEventDestroy(s.copied);
    }
    if (s.pinned) cudaFreeHost(s.pinned);
  }
}

void StagedUpload::operator()(const Tensor& host, DeviceTensor& device) {
  Slot& s = slots_[next_];
  next_ = 1 - next_;
  const size_t n = host.numel();
  BRAID_CUDA_CHECK(cudaEventSynchronize(s.copied), "input of {} floats", n);
  if (n > s.capacity) {
    if (s.pinned) BRAID_CUDA_CHECK(cudaFreeHost(s.pinned), "input of {} floats", s.capacity);
    s.pinned = nullptr;
    BRAID_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.pinned), n * sizeof(float)),
                     "pinned input of {} floats", n);
    s.capacity = n;
  }
  if (n > 0) std::memcpy(s.pinned, host.ptr(), n * sizeof(float));
  device.shape = host.shape;
  device.storage.resize(n, "input");
  copyToDevice(device.ptr(), s.pinned, n, ctx_.stream());
  BRAID_CUDA_CHECK(cudaEventRecord(s.copied, ctx_.stream()), "input of {} floats", n);
}

}  // namespace braid::trainer::cuda
