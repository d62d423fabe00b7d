#include <cuda_runtime_api.h>

#include "comm/device/pointer.h"

namespace braid::comm::device {
namespace {

class CudaPointerClassifier final : public PointerClassifier {
 public:
  PointerInfo classify(const void* ptr) const override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();  // unregistered host memory on old runtimes; clear the sticky-free error
      return {MemoryKind::kHost, -1};
    }
    switch (attr.type) {
      case cudaMemoryTypeDevice:
        return {MemoryKind::kDevice, attr.device};
      case cudaMemoryTypeManaged:
        return {MemoryKind::kManaged, attr.device};
      case cudaMemoryTypeHost:
        return {MemoryKind::kHostPinned, -1};
      default:
        return {MemoryKind::kHost, -1};
    }
  }
};

}  // namespace

const PointerClassifier& cudaPointerClassifier() {
  static const CudaPointerClassifier classifier;
  return classifier;
}

}  // namespace braid::comm::device
