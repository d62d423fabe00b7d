// GPUDirect RDMA for the verbs transport: CUDA device memory registered with the NIC through a
// dma-buf (cuMemGetHandleForAddressRange, then ibv_reg_dmabuf_mr), so writes go from and into
// GPU memory without a host copy. Compiled in CUDA builds only (dmabuf.cc); NOT yet used by the
// transport (its slots are host memory: device communicators use cuda_ipc) and never run here:
// no machine this project has holds both a GPU and an RDMA device.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>

namespace braid::transport::verbs {

/// Registers [devicePointer, devicePointer + bytes) of CUDA device memory with `pd` for local
/// and remote writes; the region's addresses are the device pointers. Throws kCudaError (the
/// driver has no dma-buf export) or kSystemError (the NIC driver refused), naming rank and bytes.
ibv_mr* registerDeviceMemory(ibv_pd* pd, void* devicePointer, size_t bytes, int rank);

}  // namespace braid::transport::verbs
