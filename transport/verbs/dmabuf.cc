#include "transport/verbs/dmabuf.h"

#include <cuda.h>  // types only: the driver is reached through cudaGetDriverEntryPoint
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace braid::transport::verbs {

namespace {

using GetHandleFn = CUresult (*)(void* handle, CUdeviceptr dptr, size_t size,
                                 CUmemRangeHandleType type, unsigned long long flags);

}  // namespace

ibv_mr* registerDeviceMemory(ibv_pd* pd, void* devicePointer, size_t bytes, int rank) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t err = cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn,
                                                           11070, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();
    fail(ErrorCode::kCudaError,
         "rank {}: verbs: registering {} bytes of device memory: the CUDA driver has no "
         "cuMemGetHandleForAddressRange (dma-buf export needs CUDA 11.7 and an open kernel module)",
         rank, bytes);
  }
  // The exported range must start and end on host pages; the region is then the part asked for.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(devicePointer);
  const uintptr_t base = start & ~(page - 1);
  const size_t span = (start + bytes - base + page - 1) & ~(page - 1);
  int fd = -1;
  const CUresult rc = reinterpret_cast<GetHandleFn>(fn)(&fd, static_cast<CUdeviceptr>(base), span,
                                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (rc != CUDA_SUCCESS || fd < 0) {
    fail(ErrorCode::kCudaError,
         "rank {}: verbs: exporting {} bytes of device memory at {} as a dma-buf failed (CUresult "
         "{})",
         rank, span, devicePointer, static_cast<int>(rc));
  }
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, start - base, bytes, start, fd,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  const int error = errno;
  close(fd);  // the registration holds its own reference
  if (mr == nullptr) {
    fail(ErrorCode::kSystemError,
         "rank {}: verbs: ibv_reg_dmabuf_mr of {} bytes of device memory failed: {} (the NIC "
         "driver needs dma-buf support: peer memory or a recent kernel)",
         rank, bytes, std::strerror(error));
  }
  return mr;
}

}  // namespace braid::transport::verbs
