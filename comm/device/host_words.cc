#include "comm/device/host_words.h"

#include <cuda_runtime_api.h>

#include <atomic>

#include "comm/device/completion.h"
#include "common/error.h"

namespace braid::comm::device {

HostWords::HostWords(int rank, size_t count, const char* what) : rank_(rank), count_(count) {
  cudaError_t err = cudaHostAlloc(reinterpret_cast<void**>(&host_), count * sizeof(uint32_t),
                                  cudaHostAllocMapped);
  if (err == cudaSuccess) {
    for (size_t i = 0; i < count; ++i) host_[i] = 0;
    err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0);
  }
  if (err != cudaSuccess) {
    if (host_ != nullptr) cudaFreeHost(host_);
    host_ = nullptr;
    fail(ErrorCode::kCudaError, "rank {}: device communicator: mapping {} ({} words) failed: {} ({})",
         rank, what, count, cudaGetErrorString(err), int(err));
  }
}

HostWords::~HostWords() {
  if (host_ != nullptr) cudaFreeHost(host_);
}

uint32_t HostWords::load(size_t i) const {
  return std::atomic_ref<uint32_t>(host_[i]).load(std::memory_order_acquire);
}

void HostWords::store(size_t i, uint32_t value) {
  std::atomic_ref<uint32_t>(host_[i]).store(value, std::memory_order_release);
}

int HostWords::signal(void* stream, size_t i, uint32_t value) {
  return launchSignalKernel(stream, device_ + i, value);
}

}  // namespace braid::comm::device
